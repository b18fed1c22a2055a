"""An `Include` loop in the ssh config is one clean line naming the files (issue 22).

asyncssh follows Include until RecursionError; the CLI must say where the loop is instead.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests import clifork


def test_an_include_loop_is_one_line_naming_the_file(tmp_path: Path) -> None:
    a, b = tmp_path / "a.conf", tmp_path / "b.conf"
    a.write_text(f"Host gpubox\n  HostName 127.0.0.1\nInclude {b}\n")
    b.write_text(f"Include {a}\n")
    res = clifork.run(
        [sys.executable, "-m", "specdebug.cli", "probe", "-F", str(a), "gpubox"],
        capture_output=True,
        timeout=60,
    )
    text = (res.stderr + res.stdout).decode()
    assert res.returncode == 2, text
    assert "Traceback" not in text and "RecursionError" not in text, text[-2000:]
    assert f"ssh config Include loop: {a} -> {b} -> {a}" in text, text
    assert len(text.strip().splitlines()) == 1, text
