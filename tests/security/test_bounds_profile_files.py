"""A profile's `extends` (or the profile itself) names a regular file of a sane size (issue 22).

`extends = "/dev/zero"` took 8.6 GB in 33 s; an `extends` naming a FIFO hung `profile check`.
Both are one clear line naming the file and the problem, at once, through the real CLI.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import clifork


def check(path: Path) -> subprocess.CompletedProcess:
    return clifork.run(
        [sys.executable, "-m", "specdebug.cli", "profile", "check", str(path)],
        capture_output=True,
        timeout=30,  # the FIFO used to hang here forever
    )


@pytest.mark.parametrize("target", ["/dev/zero", "fifo", "big"])
def test_extends_must_name_a_regular_file_of_a_sane_size(tmp_path: Path, target: str) -> None:
    if target == "fifo":
        os.mkfifo(tmp_path / "base.toml")
        target, why = str(tmp_path / "base.toml"), "is a FIFO (named pipe), not a regular file"
    elif target == "big":
        (tmp_path / "base.toml").write_text("# padding\n" * 1_000_000)
        target, why = str(tmp_path / "base.toml"), "more than a profile may be (8388608)"
    else:
        why = "/dev/zero is a character device, not a regular file"
    prof = tmp_path / "p.toml"
    prof.write_text(f'extends = "{target}"\n[server]\nargv = ["sim"]\nport = 30000\n')
    res = check(prof)
    assert res.returncode == 2, res
    text = res.stderr.decode() + res.stdout.decode()
    assert why in text and "p.toml" in text and "extends" in text, text
    assert "Traceback" not in text and len(text.strip().splitlines()) <= 2, text


def test_the_profile_itself_is_checked_too(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "p.toml")
    res = check(tmp_path / "p.toml")
    assert res.returncode == 2 and b"is a FIFO (named pipe), not a regular file" in res.stderr + res.stdout
