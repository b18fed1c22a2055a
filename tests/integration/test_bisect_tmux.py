"""The real TUI in tmux against the real sshd: a bisection driven by keys only, the culprit read off the screen."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

from specdebug.core.bisect.models import RESULT_EVENT
from specdebug.core.journal import Journal
from tests.bisectprofiles import CULPRIT, HARMLESS_FLAGS, forget_records, write_pair
from tests.tmux_harness import Tmux

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")


def test_bisection_by_keys_shows_the_culprit(sshd, tmp_path: Path) -> None:
    # one request a benchmark: the server's gen_throughput is read from its log, and with two, a log
    # sample spans the client's round trip between them
    good, bad = write_pair(
        tmp_path / "profiles",
        bad_flags=[CULPRIT, HARMLESS_FLAGS[1]],
        tag="bxtmux-",
        requests=1,
        output_len=128,
    )
    session = tmp_path / "session"
    tmux = Tmux("specdebug-test-bisect")
    tmux.kill()
    cmd = f"{sys.executable} -m specdebug.cli -F {sshd.config_path} gpubox -c {good} --session {session}"
    tmux.new_session("tui", f"{cmd}; sleep 30", 150, 40)
    try:
        tmux.wait_screen("tui", lambda s: "connected" in s, 30)
        tmux("send-keys", "-t", "tui", "6")
        tmux.wait_screen("tui", lambda s: "a starts the bisection" in s, 60)
        # the profile list is sorted: bxtmux-bad first, then bxtmux-good
        tmux("send-keys", "-t", "tui", "b")
        tmux.wait_screen("tui", lambda s: "BAD" in s, 60)
        # at full speed, in one send-keys: `g` acts on the row Down moved to (it waits its turn behind
        # the arrow still queued for the table: tui/pane.py IN_TURN_ACTIONS)
        tmux("send-keys", "-t", "tui", "Down", "g")
        tmux.wait_screen("tui", lambda s: "GOOD" in s, 60)
        # judged by the server's own decode tok/s (j): by the client's, this test's machine under the
        # suite's load moved the readings by 10-20 %, and a harmless knob was once named with the culprit
        tmux("send-keys", "-t", "tui", "j")
        tmux.wait_screen("tui", lambda s: "judged by gen_throughput" in s, 60)
        tmux("send-keys", "-t", "tui", "a")
        finished = re.compile(
            r"(FOUND|SEVERAL|INTERACTION|INCONCLUSIVE|CANNOT-TELL)\s+(culprit|explains|\d+ launches)"
        )
        screen = tmux.wait_screen("tui", lambda s: finished.search(s) is not None, 150)
        assert "FOUND  culprit: --disable-cuda-graph" in screen, screen
        assert "launches (one knob at a time: 6)" in screen  # 2 knobs, each end twice
        knob_row = re.compile(r"--disable-cuda-graph\s+culprit\s+\(absent\)\s+\(set\)")
        assert knob_row.search(screen), screen  # the knob table's state column
        tmux("send-keys", "-t", "tui", "q")
        tmux.wait_screen("tui", lambda s: finished.search(s) is None, 60)
    finally:
        tmux.kill()
        forget_records(sshd, ["bxtmux-good", "bxtmux-bad"], [session])
    results = Journal(session).events({RESULT_EVENT})
    assert results and results[-1]["culprits"] == ["--disable-cuda-graph"]
