"""Bisection cost: launches against the number of knobs, for one culprit and for a pair that only hurts together.

For N = 4, 8, 16, 32 knobs (harmless SGLang flags and env vars, plus the culprit(s)) a bisection runs on
the simulated box over the loopback sshd, at a fast time scale and with short benchmarks.  One culprit:
--disable-cuda-graph (every step 1.35x slower); two culprits: --speculative-eagle-topk 8 together with
--speculative-num-draft-tokens 16 (each alone is harmless, so one knob at a time can never find them).
Prints per run: launches (ends included), candidates (launches besides the ends), the single-culprit
bound ceil(log2 N) + 1, what one knob at a time costs (N + 2), the wall time; the last line is RESULT.

    python tests/perf/bench_bisect.py [--sizes 4,8,16,32]

Connects only to 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from specdebug.core.bisect.models import BisectOptions  # noqa: E402
from specdebug.core.bisect.run import Bisection  # noqa: E402
from specdebug.core.control.records import forget_record  # noqa: E402
from specdebug.core.journal import Journal  # noqa: E402
from specdebug.core.profiles import load_profile  # noqa: E402
from tests.bisectprofiles import CULPRIT, HARMLESS_FLAGS, PAIR, harmless_env, write_pair  # noqa: E402
from tests.boxes import ssh_box  # noqa: E402
from tests.sshd_harness import start_sshd  # noqa: E402


def knobs_for(n: int, culprits: list[list[str]]) -> tuple[list[list[str]], dict[str, str]]:
    """n knobs: the culprit flags spread among harmless flags, the rest harmless env vars."""
    harmless = HARMLESS_FLAGS[: min(len(HARMLESS_FLAGS), n - len(culprits))]
    flags = list(harmless)
    for i, c in enumerate(culprits):  # spread: 1/3 and 2/3 of the way through the flags
        flags.insert(min(len(flags), (i + 1) * len(flags) // (len(culprits) + 1) + i), c)
    return flags, harmless_env(n - len(flags))


async def one(remote, work: Path, n: int, kind: str) -> dict:
    culprits = [CULPRIT] if kind == "one" else PAIR
    flags, env = knobs_for(n, culprits)
    tag = f"bxperf{n}{kind}-"
    good, bad = write_pair(work / tag, bad_flags=flags, bad_env=env, tag=tag)
    g, b = load_profile(good), load_profile(bad)
    t0 = time.monotonic()
    engine = Bisection(remote, g, b, BisectOptions(), journal=Journal(work / tag / "session"))
    result = None
    try:
        async for ev in engine.events():
            result = getattr(ev, "result", result)
    finally:
        for name in (g.name, b.name):
            await forget_record(remote, name)
    assert result is not None
    expected = sorted(c[0] for c in culprits)
    return {
        "n": n,
        "kind": kind,
        "knobs": len(result.knobs),
        "launches": result.launches,
        "candidates": result.launches - 2,
        "bound": math.ceil(math.log2(n)) + 1,
        "naive": result.naive_launches,
        "wall_s": time.monotonic() - t0,
        "ok": result.verdict == "found" and sorted(result.culprits) == expected,
        "culprits": result.culprits,
        "search": result.search,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4,8,16,32", help="knob counts (default 4,8,16,32)")
    args = parser.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    work = Path(tempfile.mkdtemp(prefix="specdebug-bench-bisect-"))
    sshd = start_sshd(work / "sshd")
    remote = ssh_box(sshd.alias, ssh_config=sshd.config_path, connect_timeout=10)
    await remote.start()
    rows = []
    try:
        await remote.wait_connected(15)
        print(
            f"{'N':>3} {'culprits':<8} {'launches':>8} {'besides ends':>12} {'log2N+1':>7} {'naive':>5} {'wall s':>7}  result"
        )
        for kind in ("one", "pair"):
            for n in sizes:
                r = await one(remote, work, n, kind)
                rows.append(r)
                print(
                    f"{r['n']:>3} {r['kind']:<8} {r['launches']:>8} {r['candidates']:>12} {r['bound']:>7} "
                    f"{r['naive']:>5} {r['wall_s']:>7.1f}  {'ok' if r['ok'] else 'WRONG'} {r['search']}: "
                    f"{', '.join(r['culprits'])}",
                    flush=True,
                )
    finally:
        await remote.close()
        sshd.stop()

    def col(kind: str, key: str, fmt: str = "{}") -> str:
        return ",".join(fmt.format(r[key]) for r in rows if r["kind"] == kind)

    within = all(r["candidates"] <= r["bound"] for r in rows if r["kind"] == "one")
    print(
        f"RESULT bisect n={','.join(map(str, sizes))} one_candidates={col('one', 'candidates')} "
        f"bound_log2n_plus_1={col('one', 'bound')} within_bound={str(within).lower()} "
        f"pair_candidates={col('pair', 'candidates')} naive={col('one', 'naive')} "
        f"one_wall_s={col('one', 'wall_s', '{:.0f}')} pair_wall_s={col('pair', 'wall_s', '{:.0f}')} "
        f"all_found={str(all(r['ok'] for r in rows)).lower()}"
    )


if __name__ == "__main__":
    asyncio.run(main())
