"""The Logs pane's per-batch work in this process, with the shape cache and without (same run).

    python tests/perf/bench_log_parse.py [--lines N] [--batch B] [--rounds R]

N Decode batch lines (SGLang's current format) as the follower hands them over (RawLine, B per
batch) through `LogParser.parse_batch` and `MetricStore.add_match`, then one `summary()`: what
`follow_match_batches` and the pane do per batch, without SSH. Each round runs the general path
(`LogParser(shapes=False)`) and the default one back to back; the best round of each is printed,
per wall second and per CPU second of this process (the machine may be shared), with the ratio.
The two runs must give the same summary. The last line printed is `RESULT key=value ...`.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from specdebug.core.logs.events import LogMatch  # noqa: E402
from specdebug.core.logs.follow import RawLine  # noqa: E402
from specdebug.core.logs.parser import LogParser  # noqa: E402
from specdebug.core.logs.stats import MetricStore  # noqa: E402

DECODE = (
    "[2026-01-15 12:00:03 TP0] Decode batch, #running-req: {r}, #token: {t}, token usage: 0.{u:02d}, "
    "accept len: {al:.2f}, accept rate: 0.{ar:02d}, cuda graph: True, gen throughput (token/s): {g:.2f}, "
    "#queue-req: {q}"
)


def run_once(batches: list[list[RawLine]], shapes: bool) -> tuple[float, float, dict[str, object]]:
    parser, store = LogParser("sglang", from_start=True, shapes=shapes), MetricStore()
    t0, c0 = time.perf_counter(), time.process_time()
    for batch in batches:
        for m in parser.parse_batch(batch, True):
            if isinstance(m, LogMatch):
                store.add_match(m)
    summary = store.summary()
    return time.perf_counter() - t0, time.process_time() - c0, summary


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=50_000)
    ap.add_argument("--batch", type=int, default=500, help="lines per follower batch")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    items, off = [], 0
    for i in range(args.lines):
        line = DECODE.format(
            r=1 + i % 48, t=100_000 + i * 7 % 90_000, u=i % 90, al=1 + (i % 300) / 100, ar=i % 99,
            g=100 + (i % 5000) / 10, q=i % 3,
        ).encode()  # fmt: skip
        items.append(RawLine(off, line, 1))
        off += len(line) + 1
    batches = [items[i : i + args.batch] for i in range(0, len(items), args.batch)]
    best: dict[str, tuple[float, float]] = {}
    summaries: dict[str, dict[str, object]] = {}
    for _ in range(args.rounds):
        for label, shapes in (("general", False), ("shapes", True)):
            wall, cpu, summaries[label] = run_once(batches, shapes)
            w, c = best.get(label, (wall, cpu))
            best[label] = (min(w, wall), min(c, cpu))
    assert summaries["general"] == summaries["shapes"], "the two paths disagree"
    res: dict[str, float] = {}
    for label, (wall, cpu) in best.items():
        res[f"{label}_lines_per_s"] = args.lines / wall
        res[f"{label}_lines_per_cpu_s"] = args.lines / cpu
        print(
            f"{label:8s}: {res[f'{label}_lines_per_s']:.0f} lines/s, {res[f'{label}_lines_per_cpu_s']:.0f} "
            f"per CPU s (best of {args.rounds}, {args.lines} lines in batches of {args.batch})",
            flush=True,
        )
    res["ratio_per_cpu_s"] = res["shapes_lines_per_cpu_s"] / res["general_lines_per_cpu_s"]
    print(
        f"shape cache: {res['ratio_per_cpu_s']:.2f}x per CPU s (goal of issue 16: 200000 lines/s)", flush=True
    )
    print("RESULT " + " ".join(f"{k}={v:.1f}" for k, v in res.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
