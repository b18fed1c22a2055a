"""The logs pane's status line as a pure function of its facts (no screen needed)."""

from __future__ import annotations

from dataclasses import replace

from specdebug.tui.widgets.logs_status import NO_LOG, LogsStatus, status_text

BASE = LogsStatus(
    where="gpubox:/var/log/sglang.log",
    state="following",
    paused=None,
    matches=12,
    dropped=0,
    marks=0,
    pack="sglang",
    filter_text="",
    hide=True,
    include_warmup=False,
    notice=None,
)


def test_following_says_where_state_counts_and_modes() -> None:
    plain = status_text(BASE).plain
    assert plain == "gpubox:/var/log/sglang.log  following  12 matches  pack sglang  warmup excluded"


def test_paused_dropped_marks_filter_and_notice_are_said() -> None:
    s = replace(BASE, paused=8, dropped=3, marks=2, filter_text="accept", notice="rotated: new file")
    plain = status_text(s).plain
    assert "PAUSED 8 pending (End: follow)" in plain and "3 dropped from view" in plain
    assert "2 marks" in plain and "filter /accept/ (hide)" in plain and plain.endswith("rotated: new file")
    assert "filter /accept/ (highlight)" in status_text(replace(s, hide=False)).plain


def test_nothing_followed_says_how_to_start() -> None:
    plain = status_text(replace(BASE, where=None, state="idle", pack=None)).plain
    assert plain.startswith(NO_LOG + "  idle") and "pack auto" in plain
