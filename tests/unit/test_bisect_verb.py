"""`specdebug bisect` usage errors: exit 2 with one clear line, before any connection is tried."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests import clifork

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
GOOD, BAD = str(EXAMPLES / "eagle3-2step-nccl.toml"), str(EXAMPLES / "eagle3-3step.toml")


def bisect(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    # the host is a name that never resolves: a usage error must come first
    cmd = [
        sys.executable,
        "-m",
        "specdebug.cli",
        "bisect",
        "nohost.invalid",
        "--session",
        str(tmp_path / "s"),
    ]
    return clifork.run([*cmd, *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ((), "needs --good"),
        (("--good", GOOD, "--bad", "missing.toml"), "missing.toml: file not found"),
        (("--good", GOOD, "--bad", BAD, "--metric", "speed"), "--metric 'speed': unknown"),
        (("--good", GOOD, "--bad", BAD, "--gate", "verify_ms=25"), "expected NAME<=VALUE"),
        (("--good", GOOD, "--bad", BAD, "--group", "--nothing-*"), "matches no knob"),
        (("--resume",), "no unfinished bisection"),
        (("--good", GOOD, "--bad", BAD, "--repeats", "0"), "must be at least 1"),
        (("--good", GOOD, "--bad", BAD, "--max-age", "-5"), "must be 0 or more seconds"),
    ],
)
def test_usage_errors_exit_2_with_one_line(tmp_path: Path, args: tuple[str, ...], says: str) -> None:
    res = bisect(tmp_path, *args)
    assert res.returncode == 2, res.stderr
    assert says in res.stderr and "Traceback" not in res.stderr
