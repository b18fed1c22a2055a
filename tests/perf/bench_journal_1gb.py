"""What `history` and `report` cost over a 1 GB session journal: wall time and peak memory.

    python tests/perf/bench_journal_1gb.py [--gb 1.0]

The journal (tests/reliability/bigjournal.py: launch records with ~100 KB drift snapshots, three
benchmark results among them) is written to a temporary folder and removed afterwards.  Issue 40
measured the old reader at 183 s and 10.6 GB for 1 GB.
Last line:
    RESULT size_mib=S history_s=T peak_rss_mib=M results=N report_s=T report_peak_rss_mib=M report_results=N
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.reliability.bigjournal import write_big_journal  # noqa: E402
from tests.security.cli_run import run_cli  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gb", type=float, default=1.0)
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bigjournal-"))
    try:
        t0 = time.monotonic()
        size = write_big_journal(folder / "sess", int(args.gb * (1 << 30)))
        print(f"wrote {size / 2**20:.0f} MiB in {time.monotonic() - t0:.0f} s", flush=True)
        t0 = time.monotonic()
        res = run_cli("history", "--session", str(folder / "sess"), "--json", timeout=3600)
        took = time.monotonic() - t0
        results = len(json.loads(res.out)["results"]) if res.rc == 0 else -1
        t0 = time.monotonic()
        rep = run_cli("report", "--session", str(folder / "sess"), timeout=3600)
        rep_took = time.monotonic() - t0
        rep_rows = sum(ln.startswith("| ") and "| big |" in ln for ln in rep.out.splitlines())
        print(
            f"RESULT size_mib={size / 2**20:.0f} history_s={took:.1f} peak_rss_mib={res.peak_rss_mb:.0f} results={results}"
            f" report_s={rep_took:.1f} report_peak_rss_mib={rep.peak_rss_mb:.0f} report_results={rep_rows}"
        )
        return 0 if res.rc == 0 and rep.rc == 0 else 1
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
