"""A 14 MB layout file is a named error, not a blank TUI (issue 22)."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from specdebug.tui.settings import find_layout, load_keymap
from tests import clifork


def test_a_huge_layout_is_refused_by_name(tmp_path: Path) -> None:
    big = tmp_path / "big.tcss"
    big.write_text("Screen { }\n" * 1_400_000)  # ~14 MB
    with pytest.raises(ValueError, match=r"layout .*big\.tcss is \d+ bytes, more than a layout may be"):
        find_layout(str(big))
    main, seat = pty.openpty()  # the TUI needs a terminal before it looks at its layout
    try:
        res = clifork.run(
            [sys.executable, "-m", "specdebug.cli", "tui", "--layout", str(big)],
            stdin=seat,
            stdout=seat,
            stderr=subprocess.PIPE,
            timeout=60,
        )
    finally:
        os.close(seat)
        os.close(main)
    assert res.returncode == 2, res
    assert b"big.tcss is " in res.stderr and b"more than a layout may be" in res.stderr
    assert b"Traceback" not in res.stderr


def test_a_huge_keymap_is_reported_and_ignored(tmp_path: Path) -> None:
    big = tmp_path / "keymap.toml"
    big.write_text("# x\n" * 4_000_000)
    keymap = load_keymap(big)
    assert keymap == {} and "more than a keymap may be" in keymap.problems[0]
