"""How many resident helpers start at once, and how often one is tried.

Why: with 64 hosts on a box whose login shell is slow to start, every helper started at the same moment
and half of them ran past their start timeout while the box was busy starting the others.  Starts go
through a gate (a few at a time per event loop; waiting in line does not count against the timeout),
and a start that times out is tried again before the host falls back to exec channels.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import Callable
from typing import Any

from specdebug.remote.boxcode import helper_argv, noise_warning
from specdebug.remote.probe import HELPER_START_S, HelperStartFailed, ProbeChannel
from specdebug.remote.requests import end_spawned
from specdebug.transport.base import RemoteError, Transport

log = logging.getLogger(__name__)

HELPER_ATTEMPTS = 2
CONCURRENT_STARTS = 8
END_ON_CANCEL_S = 8.0  # a cancelled start's python3 is ended within this (end_spawned waits ~5 s for it)

_gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = weakref.WeakKeyDictionary()


def helper_start_gate() -> asyncio.Semaphore:
    """This event loop's gate (a Semaphore is bound to the loop it is first used on)."""
    loop = asyncio.get_running_loop()
    gate = _gates.get(loop)
    if gate is None:
        gate = _gates[loop] = asyncio.Semaphore(CONCURRENT_STARTS)
    return gate


async def start_helper(
    transport: Transport,
    name: str,
    warn: Callable[[str], None],
    *,
    timeout: float | None = None,
    quiet: bool = False,
) -> tuple[ProbeChannel | None, dict[str, Any] | None]:
    """(the helper channel, its greeting), or (None, None) after a warning saying why not; a python3 that
    never greeted is ended on the box (OpenSSH would leave it running).  quiet: the caller treats no
    helper as a failed connect, so the reason is raised (RemoteError) instead of warned about."""
    wait_s = HELPER_START_S if timeout is None else timeout  # read now: tests shorten it
    why = ""
    for attempt in range(1, HELPER_ATTEMPTS + 1):
        proc = None
        probe: ProbeChannel | None = None
        timed_out = False
        try:
            async with helper_start_gate():
                proc = await transport.exec(helper_argv())
                probe = ProbeChannel(proc, errors=(OSError, ConnectionError, ValueError, RemoteError))
                try:
                    info = await probe.start(wait_s)
                finally:
                    if probe.noise:
                        warn(noise_warning(probe.noise))
            return probe, info
        except asyncio.CancelledError:
            # the owner gave up (a verb's connect deadline, a close): a python3 that has not greeted
            # is ended on the box, not left there (a hanging python3 left its `sleep` behind)
            if probe is not None and probe.spawned_pid is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(end_spawned(transport, probe.spawned_pid), END_ON_CANCEL_S)
            if proc is not None:
                with contextlib.suppress(Exception):
                    proc.close()
            raise
        except HelperStartFailed as exc:
            why = str(exc)
            timed_out = isinstance(exc.__cause__, TimeoutError)
            if exc.pid is not None:
                why += "; " + await end_spawned(transport, exc.pid)
        except (RemoteError, OSError, ValueError, TimeoutError) as exc:
            why = str(exc) or type(exc).__name__
        if proc is not None:
            with contextlib.suppress(Exception):  # best effort: the channel may be gone already
                proc.close()
        if not timed_out:
            break
        why += f" ({attempt} of {HELPER_ATTEMPTS} tries)"
    if quiet:
        raise RemoteError(f"{name}: the helper did not start: {why}")
    log.warning("%s: resident helper unavailable (%s); using one exec channel per request", name, why)
    warn(f"no python3 helper ({why}); probes use exec channels (slower)")
    return None, None
