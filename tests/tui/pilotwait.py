"""Waiting for an in-process app to settle: one `pilot.pause()` is not enough on a loaded machine
(a table measures and scrolls on later idles)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any


async def until(pilot: Any, cond: Callable[[], bool], timeout_s: float = 60.0) -> bool:
    """Pause until `cond()` holds, at most `timeout_s` (a bound, not an expected time): whether it held."""
    return await _poll(cond, timeout_s, lambda: pilot.pause(0.02))


async def until_slept(cond: Callable[[], bool], timeout_s: float = 30.0) -> bool:
    """`until` for tests that must not let the pilot wait for idle between checks (keys queued at once)."""
    return await _poll(cond, timeout_s, lambda: asyncio.sleep(0.02))


async def _poll(cond: Callable[[], bool], timeout_s: float, wait: Callable[[], Awaitable[Any]]) -> bool:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            return False
        await wait()
    return True


TOASTS_ATTR = "_toasts_in_test"  # kept by tests/conftest.py's _keep_toasts on every App


def toasts(app: Any) -> list[str]:
    """Every toast `app` raised, expired or not.  A toast leaves `app._notifications` when its
    timeout passes (5 s by default), and a loaded machine stalls longer than that between the toast
    and the test's look: two TUI notifications and the auth-log hint were "not seen" that way."""
    return [message for message, _ in toasts_with_severity(app)]


def toasts_with_severity(app: Any) -> list[tuple[str, str]]:
    kept = getattr(app, TOASTS_ATTR, None)
    if kept is not None:
        return list(kept)
    return [(str(n.message), n.severity) for n in app._notifications]  # noqa: SLF001


async def until_key_screen(pilot: Any, app: Any, remote: Any, timeout_s: float = 180.0) -> None:
    """The host-key screen is up and drawn, as a user sees it before answering (a key pressed the
    moment it was pushed, before its buttons were mounted, was lost beside 8 busy loops).  A bound,
    not an expected time; a failure names the connection's state and the screens, so it says where."""

    def shown() -> bool:
        screen = app.screen
        return type(screen).__name__ == "HostKeyScreen" and screen.is_mounted and bool(screen.query("Button"))

    assert await until(pilot, shown, timeout_s), (
        f"no host-key screen after {timeout_s:.0f} s: {remote.status}; "
        f"screens {[type(s).__name__ for s in app.screen_stack]}"
    )
    await pilot.pause()  # its first refresh: the keys go to it from here
