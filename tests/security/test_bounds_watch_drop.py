"""An SSH drop just after a launch is a drop, not a failed server (issue 22).

The link drops while the watchers are starting (the log follower opening its channel): the
channel refusal that the drop causes must not read as "cannot read the server log" (an instant
FAILED, or a timeout later, for a server that comes up healthy).  The watch says the link went
(`reconnecting`), picks up again after the reconnect (`resumed`), and the verdict is ready.
Real sshd, the sim launched on the box.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

import pytest

from specdebug.core.control import actions as server_control
from specdebug.core.control.events import ConnectionNote, Launched, LogProblem, Verdict
from specdebug.core.control.monitor import ServerMonitor
from specdebug.core.control.watch import launch_and_watch
from tests.integration.test_startup import sim_profile

pytestmark = pytest.mark.slow


def _print_task_stacks() -> None:
    """Every task's stack, while the watch still holds its watchers: in the rare failure (stop 32,
    36, and on main after today's merges) the log follower logged no event at all, not even its
    first agent's `opened`, so it waited on the client side somewhere before the agent's first
    output, and only its stack can say where."""
    for task in asyncio.all_tasks():
        print(f"task {task.get_name()}: {task.get_coro()!r}")
        task.print_stack(limit=30, file=sys.stdout)


@pytest.mark.parametrize("after_s", [0.0, 0.03, 0.08])
async def test_a_drop_while_the_watch_starts_is_resumed(
    remote, tmp_path: Path, after_s: float, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="specdebug")
    profile = sim_profile(tmp_path, "earlydrop", timeout_s=60)
    events: list[object] = []

    async def drop_soon() -> None:
        await asyncio.sleep(after_s)
        remote.drop_connection()

    dropper = None
    try:
        async for ev in launch_and_watch(remote, profile):
            events.append(ev)
            if isinstance(ev, Launched):
                dropper = asyncio.create_task(drop_soon())
            if isinstance(ev, Verdict) and ev.verdict != "ready":
                _print_task_stacks()  # the watchers still run here: where the log follower waits
        verdict = events[-1]
        assert isinstance(verdict, Verdict)
        # every event on stdout, and the watch's own debug log (the follower's events): a rare failure
        # under heavy load (1 in ~50, stop 32; again in stop 36 beside three busy loops) ended at "no
        # progress for 60 s, health 200, ready line not seen", with no phase at all; what the watch and
        # its follower saw is the clue, and pytest cuts a long assertion message short
        seen = [f"{type(e).__name__}: {e!r}"[:300] for e in events]
        print("\n".join(seen))
        assert verdict.verdict == "ready", verdict.reason
        notes = [e.state for e in events if isinstance(e, ConnectionNote)]
        assert notes[:2] == ["reconnecting", "resumed"], notes
        assert not [e for e in events if isinstance(e, LogProblem)]
        assert "ready" in [p.name for p in verdict.phases]
        monitor = ServerMonitor()  # what a front end shows: the drop said, then the reconnect
        said = []
        for ev in events:
            monitor.apply(ev)
            said.append(monitor.message)
        assert (
            any(m.startswith("connection lost") for m in said)
            and "reconnected: the watch resumed" in said[-1]
        )
    finally:
        if dropper is not None:
            await dropper
        await remote.wait_connected(30)
        await server_control.stop(remote, profile, grace_s=5)
