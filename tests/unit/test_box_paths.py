"""core.profiles.paths: the one `~` rule every verb uses (through every verb: tests/integration/test_home_log_paths.py)."""

from __future__ import annotations

from specdebug.core.profiles.paths import login_relative, needs_home


def test_the_rule():
    assert [needs_home(p) for p in ("~", "~/a.log", "/a.log", "a.log", "~bob/a.log")] == [
        True,
        True,
        False,
        False,
        False,
    ]
    assert login_relative("~/logs/a.log") == "logs/a.log" and login_relative("~") == "."
    assert login_relative("/var/log/a.log") == "/var/log/a.log"
