"""Every verb whose reader leaves early (`specdebug profile check ... | head`) exits quietly: no
BrokenPipeError traceback, no "Exception ignored" line (issue 41).  The child's stdout is a pipe whose
read end is closed before it starts, so its first write fails: no timing involved."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

CASES = {
    "profile-check": ["profile", "check", "baseline"],
    "profile-schema": ["profile", "schema"],
    "help": ["--help"],
    "verb-help": ["launch", "--help"],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_closed_stdout_ends_quietly(name: str) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        r = subprocess.run(
            [sys.executable, "-m", "specdebug.cli", *CASES[name]],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert "BrokenPipeError" not in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 0, r.stderr
