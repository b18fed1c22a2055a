"""A large session journal for the streaming-read checks: launch records with drift snapshots of
~100 KB each (what a long session of launches piles up), and a few benchmark results among them.

Written line by line (the generator itself holds one record), so a 1 GB file costs no memory."""

from __future__ import annotations

import json
from pathlib import Path

from specdebug.core.bench.models import BenchConfig, BenchResult
from specdebug.core.control.records import ServerRecord
from specdebug.core.records import BenchResultRecord, LaunchRecord

DRIFT_FILES = 800  # modified-file entries of one snapshot: ~100 KB a launch line


def _launch_line(i: int) -> bytes:
    server = ServerRecord(profile="big", pid=1000 + i, pgid=1000 + i, port=30000, log_file="/tmp/big.log")
    drift = {
        "modified": [
            {
                "package": "torch",
                "file": f"torch/lib/part_{i}_{n}.py",
                "why": "sha256 differs from RECORD" * 3,
            }
            for n in range(DRIFT_FILES)
        ]
    }
    rec = LaunchRecord(server=server, drift=drift, ts=1_700_000_000.0 + i)
    return (json.dumps(rec.to_json()) + "\n").encode()


def _result_line(i: int, tok_s: float) -> bytes:
    result = BenchResult(
        profile="big", host="gpubox", config=BenchConfig(concurrency=1, requests=4), output_tok_s=tok_s
    )
    rec = BenchResultRecord(result=result, ts=1_700_000_000.0 + i + 0.5)
    return (json.dumps(rec.to_json()) + "\n").encode()


def write_big_journal(session: Path, size_bytes: int, results: int = 3) -> int:
    """events.jsonl of about `size_bytes` in `session`; returns its size.  `results` bench results
    are spread through it (#1 at the start, the last at the end)."""
    session.mkdir(parents=True, exist_ok=True)
    path = session / "events.jsonl"
    line = _launch_line(0)
    launches = max(1, size_bytes // len(line))
    every = max(1, launches // max(1, results - 1))
    written = 0
    with open(path, "wb") as fh:
        for i in range(launches):
            if i % every == 0 and written < results:
                fh.write(_result_line(i, 80.0 + written))
                written += 1
            fh.write(line if i % 997 else _launch_line(i))
        while written < results:
            fh.write(_result_line(launches + written, 80.0 + written))
            written += 1
    return path.stat().st_size
