"""Run the specdebug CLI in its own process group with a wall-clock limit and its peak RSS.

A hang (the old behaviour on a FIFO or an empty-matching regex) fails the test after `timeout`
instead of stalling the suite; the whole group is killed, so nothing it started is left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass

import pytest

# the child's own peak RSS (RUSAGE_CHILDREN of a wrapper that ran only it)
_WRAP = (
    "import resource, subprocess, sys\n"
    "r = subprocess.run(sys.argv[1:])\n"
    "sys.stderr.write('\\nPEAK_RSS_KB=%d\\n' % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    "sys.exit(r.returncode)\n"
)


@dataclass
class CliRun:
    rc: int
    out: str
    err: str
    peak_rss_mb: float


def run_cli(*args: str, timeout: float = 120.0) -> CliRun:
    cmd = [sys.executable, "-c", _WRAP, sys.executable, "-m", "specdebug.cli", *args]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"specdebug {' '.join(args)} did not end within {timeout:g} s")
    head, _, tail = err.rpartition("\nPEAK_RSS_KB=")
    rss = int(tail.strip()) / 1024 if tail.strip().isdigit() else 0.0
    return CliRun(proc.returncode, out, head if tail else err, rss)
