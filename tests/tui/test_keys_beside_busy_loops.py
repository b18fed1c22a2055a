"""No key is lost through the terminal while four busy loops compete for the CPU.

The real TUI in tmux on the loopback sshd: each round is typed as a terminal sends it (one burst:
leave the Logs pane, come back, open the filter, clear it, a word, Enter), then the round's word
must show as the filter in the Logs status line.  Four busy loops (children of this test, niced,
killed at the end) run beside it: a key the app drops (or hands to the pane being left) shows as a
shorter or different word.  Waits are for the screen, with a deadline; nothing is timed.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from tests.tmux_harness import Tmux

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")]

BUSY_LOOPS = int(os.environ.get("SPECDEBUG_TEST_BUSY_LOOPS", "4"))
WORDS = [
    "verifyaccept",
    "drafttokenspec",
    "rankncclready",
    "eagleworkerkv",
    "schedulerlogits",
    "pagedkvcache",
]
# a loop ends by itself after this long even if the test's cleanup never runs
BUSY = "import time\nend = time.monotonic() + {s}\nwhile time.monotonic() < end:\n    pass\n"
FILTER = re.compile(r"filter /([a-z]*)/")


def shown_filter(screen: str) -> str | None:
    found = FILTER.search(screen)
    return found.group(1) if found else None


def test_every_key_of_bursts_across_pane_switches_arrives_beside_busy_loops(sshd, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    tmux = Tmux("specdebug-test-busy-keys")
    tmux.kill()
    busy: list[subprocess.Popen[bytes]] = []
    try:
        tmux.new_session(
            "tui",
            f"env HOME={home} {sys.executable} -m specdebug.cli -F {sshd.config_path} gpubox "
            f"--session {tmp_path / 'session'}",
            160,
            40,
        )
        tmux.wait_screen("tui", lambda s: "gpubox connected" in s and "q Quit" in s, 60)
        busy = [
            subprocess.Popen(
                ["nice", "-n", "10", sys.executable, "-c", BUSY.format(s=300)],
                start_new_session=True,
                stdout=subprocess.DEVNULL,
            )
            for _ in range(BUSY_LOOPS)
        ]
        got: list[str | None] = []
        for word in WORDS:
            tmux("send-keys", "-t", "tui", "4", "3", "/", "C-u")
            tmux("send-keys", "-t", "tui", "-l", word)
            tmux("send-keys", "-t", "tui", "Enter")
            deadline = time.monotonic() + 30  # a bound under load, not an expected time
            screen = tmux.screen("tui")
            while shown_filter(screen) != word and time.monotonic() < deadline:
                time.sleep(0.1)
                screen = tmux.screen("tui")
            got.append(shown_filter(screen))
            if got[-1] != word:  # the next rounds would wait as long again: say what the screen shows
                break
        assert got == WORDS[: len(got)] and len(got) == len(WORDS), f"{got}; last screen:\n{screen}"
        assert got == WORDS, (
            f"{sum(g != w for g, w in zip(got, WORDS, strict=True))} of {len(WORDS)} rounds lost keys"
        )
    finally:
        for proc in busy:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        tmux.kill()
