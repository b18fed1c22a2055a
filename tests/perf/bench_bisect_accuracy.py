"""Bisection accuracy over a scenario matrix on the sim, over the real loopback sshd.

Each scenario is a good/bad sim pair whose true culprits are known from the sim's cost model:
one culprit among 3 / 8 / 15 knobs, a pair that hurts only together, three equal additive knobs
(the NCCL vars), the same with a small fourth (--decode-scale 1.08), a neutral knob next to a
1.02x / 1.05x change under --noise 0.05, gaps of 1.2x and 2x, a box that slows down during the run
(the sim's --slowdown-file), a stale cache (the good end measured under load 20 minutes earlier),
a bad end that crashes, one that hangs, a candidate that crashes, and a vLLM pair; and issue 39's shapes:
an interaction next to an additive knob, a crash hiding a slowdown, a box that speeds up steadily, one
culprit among 4 / 8 / 16 knobs (with the goal ceil(log2 N) + 3 launches).  One line per
run, then the accuracy table: correct / coarse (the true culprits named, and those not named inside
the set the answer says unresolved, with its share: nothing claimed is false) / partial / wrong (with
exit 0) / honest (no exit 0), and the launches against one knob at a time.  The bar: no run wrong or
partial with exit 0.

    python tests/perf/bench_bisect_accuracy.py [--runs 2] [--parallel 3] [--only NAME,...]

Connects only to 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from specdebug.core.bisect.models import TRIAL_EVENT, BisectOptions, Finished, TrialStarted  # noqa: E402
from specdebug.core.bisect.run import Bisection  # noqa: E402
from specdebug.core.control.records import forget_record  # noqa: E402
from specdebug.core.journal import Journal  # noqa: E402
from specdebug.core.profiles import load_profile  # noqa: E402
from tests.bisectprofiles import CULPRIT, HARMLESS_FLAGS, NCCL, PAIR, drop_env, harmless_env, write_pair  # noqa: E402
from tests.boxes import ssh_box  # noqa: E402
from tests.sshd_harness import start_sshd  # noqa: E402

METRIC = "gen_throughput"  # the server's own decode rate: this loaded machine's stalls do not move it
OOM = ["--mem-fraction-static", "0.99"]  # no room for cuda graphs; fine without them
EXIT0 = ("found", "several", "interaction")


@dataclass
class Scenario:
    name: str
    bad_flags: list[list[str]]
    expect: set[str]  # the true culprits (empty: no answer is right, only an honest one)
    bad_env: dict = field(default_factory=dict)
    sim_extra: list[str] = field(default_factory=list)
    drift_after: int | None = None  # launches before the box slows down (1.25x)
    stale: bool = False
    ready_timeout: int = 60
    vllm: bool = False
    allowed: set[str] = field(default_factory=set)  # may be named too (a knob that cannot be measured alone)
    metric: str = METRIC
    ramp: float | None = None  # the box's factor changes by this much before every launch (steady drift)
    budget: int | None = None  # the goal for its launches (one culprit: ceil(log2 N) + 3)


def scenarios() -> list[Scenario]:
    h = HARMLESS_FLAGS
    dc = "--disable-cuda-graph"
    return [
        Scenario("single-3", [h[0], CULPRIT, h[1]], {dc}),
        Scenario("single-8", [*h[:3], CULPRIT, *h[3:5]], {dc}, bad_env=harmless_env(2)),
        Scenario("single-15", [*h[:4], CULPRIT, *h[4:7]], {dc}, bad_env=harmless_env(7)),
        Scenario("interaction", [h[0], PAIR[0], h[1], PAIR[1]], {"--speculative-eagle-topk", "--speculative-num-draft-tokens"}),
        Scenario("additive-3", [h[0]], set(NCCL), bad_env=drop_env(list(NCCL))),
        Scenario("additive-3-small", [h[0], ["--decode-scale", "1.08"]], {*NCCL, "--decode-scale"}, bad_env=drop_env(list(NCCL))),
        Scenario("neutral-1.02-noise", [h[0], ["--decode-scale", "1.02"]], set(), sim_extra=["--noise", "0.05"]),
        Scenario("neutral-1.05-noise", [h[0], ["--decode-scale", "1.05"]], {"--decode-scale"}, sim_extra=["--noise", "0.05"]),
        Scenario("gap-1.2x", [h[0], ["--decode-scale", "1.2"], h[1], h[2]], {"--decode-scale"}),
        Scenario("gap-2x", [h[0], h[1], ["--decode-scale", "2.0"], h[2]], {"--decode-scale"}),
        Scenario("drift", [h[0], CULPRIT, h[1], h[2]], {dc}, drift_after=4),
        Scenario("stale-cache", [h[0], CULPRIT, h[1]], {dc}, stale=True),
        Scenario("bad-crashes", [h[0], ["--fail-at", "cuda_graph"], h[1]], {"--fail-at"}),
        Scenario("bad-hangs", [h[0], ["--hang-at", "kv_cache"], h[1]], {"--hang-at"}, ready_timeout=12),
        Scenario("candidate-crashes", [OOM, h[0], CULPRIT], {dc}, allowed={"--mem-fraction-static"}),
        Scenario("vllm-pair", [["--max-num-batched-tokens", "8192"], ["--enforce-eager"]], {"--enforce-eager"}, vllm=True, metric="output_tok_s"),
        # issue 39's shapes
        Scenario("additive-interaction", [h[0], PAIR[0], ["--decode-scale", "1.3"], PAIR[1]], {"--decode-scale", *(p[0] for p in PAIR)}),
        Scenario("crash-hides-slowdown", [h[0], ["--fail-at", "cuda_graph"], ["--decode-scale", "1.25"]], {"--fail-at", "--decode-scale"}),
        Scenario("box-speeds-up", [h[0], CULPRIT, h[1]], {dc}, ramp=-0.04),
        Scenario("single-of-4", [h[0], CULPRIT, h[1]], {dc}, bad_env=harmless_env(1), budget=math.ceil(math.log2(4)) + 3),
        Scenario("single-of-8", [*h[:4], CULPRIT, *h[4:6]], {dc}, bad_env=harmless_env(1), budget=math.ceil(math.log2(8)) + 3),
        Scenario("single-of-16", [*h[:4], CULPRIT, *h[4:7]], {dc}, bad_env=harmless_env(8), budget=math.ceil(math.log2(16)) + 3),
    ]  # fmt: skip


def write_vllm(folder: Path, bad_flags: list[list[str]], tag: str) -> tuple[Path, Path]:
    from tests.integration.test_bisect_vllm import write_vllm_pair

    return write_vllm_pair(folder, bad_flags, tag=tag)


def classify(
    s: Scenario, verdict: str, culprits: set[str], confirmed: bool, unresolved: frozenset[str] = frozenset()
) -> str:
    """correct | coarse (the culprits named are true, and every true one not named lies in the set said
    unresolved, with its share: nothing claimed is false) | partial | wrong | honest (no exit 0)."""
    exit0 = verdict in EXIT0 and confirmed
    if not exit0:
        return "honest"
    if s.expect and s.expect <= culprits <= s.expect | s.allowed:
        return "correct"
    if s.expect and culprits <= s.expect | s.allowed and s.expect - culprits <= unresolved:
        return "coarse"
    if culprits and culprits < s.expect:
        return "partial"
    return "wrong"


def noise_source(result) -> str:
    """What the judge's noise came from: runs (repeats) | steps (the server's per-step lines) | start
    (start / no start: no noise) | floor (not measured)."""
    e = result.evidence
    if result.metric_used.startswith("failed_start") and "then" not in result.metric_used:
        return "start"
    if e is None or not e.noise_dof:
        return "floor"
    return "steps" if "per-step figure" in e.why else "runs"


async def one(remote, work: Path, s: Scenario, run: int) -> dict:
    tag = f"bxacc-{s.name}-{run}-"
    folder = work / tag
    slow = folder / "slowdown"
    extra = [*s.sim_extra, "--slowdown-file", str(slow)]
    if s.vllm:
        good, bad = write_vllm(folder, s.bad_flags, tag)
    else:
        good, bad = write_pair(
            folder, bad_flags=s.bad_flags, bad_env=s.bad_env, sim_extra=extra, tag=tag,
            ready_timeout=s.ready_timeout,
        )  # fmt: skip
    g, b = load_profile(good), load_profile(bad)
    journal = Journal(folder / "session")
    options = BisectOptions(metric=s.metric)  # the vLLM sim's log stats are too coarse at this length
    t0 = time.monotonic()
    try:
        if s.stale:  # the first bisection under load (1.3x), its journal aged by 20 minutes
            slow.write_text("1.3")
            async for _ in Bisection(remote, g, b, options, journal=journal).events():
                pass
            events = journal.path.read_text().splitlines()
            aged = []
            for line in events:
                ev = json.loads(line)
                if ev.get("kind") == TRIAL_EVENT:
                    ev["started_at"] -= 1200
                    ev["finished_at"] -= 1200
                aged.append(json.dumps(ev))
            journal.path.write_text("\n".join(aged) + "\n")
            slow.write_text("1.0")
        engine = Bisection(remote, g, b, options, journal=Journal(folder / "session"))
        result, started = None, 0
        async for ev in engine.events():
            if isinstance(ev, TrialStarted):
                started += 1
                if s.drift_after is not None and started == s.drift_after + 1:
                    slow.write_text("1.25")
                if s.ramp is not None:  # read by the server at its launch: a steady drift across launches
                    slow.write_text(f"{max(0.2, 1.0 + s.ramp * started):.3f}")
            if isinstance(ev, Finished):
                result = ev.result
    finally:
        for name in (g.name, b.name):
            await forget_record(remote, name)
    assert result is not None
    culprits = set(result.culprits)
    cls = classify(s, result.verdict, culprits, result.confirmed, frozenset(result.unresolved))
    return {
        "scenario": s.name,
        "run": run,
        "verdict": result.verdict,
        "culprits": sorted(culprits),
        "explained": result.explained,
        "confirmed": result.confirmed,
        "launches": result.launches,
        "unresolved": sorted(result.unresolved),
        "naive": result.naive_launches,
        "class": cls,
        "noise": noise_source(result),
        "budget": s.budget,
        "ends": (result.evidence.why[:60] if result.evidence else ""),
        "s": time.monotonic() - t0,
        "note": (result.notes or [""])[-1][:90],
        # what each launch measured: the config (its knobs, or the end) x launches, its share of the gap
        "trials": " ".join(
            f"{'+'.join(t.applied) if t.role.value == 'candidate' else t.role.value}x{t.launches}"
            f"({t.share:+.2f})"
            if t.share is not None
            else f"{'+'.join(t.applied) or t.role.value}x{t.launches}"
            for t in result.trials
        ),
    }


async def main_async(runs: int, parallel: int, only: set[str], show_trials: bool = False) -> int:
    chosen = [s for s in scenarios() if not only or s.name in only]
    sshd = start_sshd(Path(tempfile.mkdtemp(prefix="bxacc-sshd-")))
    work = Path(tempfile.mkdtemp(prefix="bxacc-"))
    remote = ssh_box(sshd.alias, ssh_config=sshd.config_path, keepalive_interval=2.0, connect_timeout=10.0)
    rows: list[dict] = []
    try:
        await remote.start()
        await remote.wait_connected(20)
        gate = asyncio.Semaphore(parallel)
        jobs = [(s, r) for r in range(runs) for s in chosen]
        jobs += [(s, r) for r in range(runs, runs + 1) for s in chosen if "noise" in s.name]

        async def go(s: Scenario, r: int) -> None:
            async with gate:
                try:
                    row = await one(remote, work, s, r)
                except Exception as exc:  # a run that broke is reported, not hidden
                    row = {"scenario": s.name, "run": r, "verdict": "error", "culprits": [], "class": "error",
                           "launches": 0, "naive": 0, "s": 0.0, "note": f"{type(exc).__name__}: {exc}"[:90],
                           "explained": None, "confirmed": False}  # fmt: skip
                rows.append(row)
                print(
                    f"{row['scenario']:<20} run {row['run']}  {row['class']:<8} {row['verdict']:<12} "
                    f"culprits={','.join(row['culprits']) or '-'}  explained={row['explained']}  "
                    + (f"unresolved={','.join(row['unresolved'])}  " if row.get("unresolved") else "")
                    + f"launches={row['launches']} (one at a time {row['naive']}"
                    + (f", goal {row['budget']}" if row.get("budget") else "")
                    + f")  {row['s']:.0f}s  {row['note']}",
                    flush=True,
                )
                if show_trials and row.get("trials"):
                    print(f"    trials: {row['trials']}", flush=True)

        await asyncio.gather(*(go(s, r) for s, r in jobs))
    finally:
        await remote.close()
        sshd.stop()
    counts = {
        k: sum(1 for r in rows if r["class"] == k)
        for k in ("correct", "coarse", "partial", "wrong", "honest", "error")
    }
    print()
    print(
        "| runs | correct | coarse (rest said unresolved) | partial (exit 0) | wrong (exit 0) | honest cannot-tell / no exit 0 | errors |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    print(
        f"| {len(rows)} | {counts['correct']} | {counts['coarse']} | {counts['partial']} | {counts['wrong']} | "
        f"{counts['honest']} | {counts['error']} |"
    )
    launches = sum(r["launches"] for r in rows)
    naive = sum(r["naive"] for r in rows)
    print(f"launches: {launches} in all, one knob at a time (each knob once, each end twice): {naive}")
    print()
    print("| scenario | run | class | verdict | judge's noise | launches | one knob at a time | goal |")
    print("|---|---:|---|---|---|---:|---:|---:|")
    for r in sorted(rows, key=lambda r: (r["scenario"], r["run"])):
        over = " (over)" if r["launches"] > r["naive"] else ""
        print(
            f"| {r['scenario']} | {r['run']} | {r['class']} | {r['verdict']} | {r.get('noise', '')} | "
            f"{r['launches']}{over} | {r['naive']} | {r.get('budget') or ''} |"
        )
    above = sum(1 for r in rows if r["launches"] > r["naive"])
    over_goal = sum(1 for r in rows if r.get("budget") and r["launches"] > r["budget"])
    bad = counts["partial"] + counts["wrong"]
    print(
        f"SUMMARY rows over one knob at a time: {above} of {len(rows)}; over the issue's goal: {over_goal} of "
        f"{sum(1 for r in rows if r.get('budget'))}; wrong or partial with exit 0: {bad}"
    )
    print(f"RESULT {'ok' if bad == 0 else 'FAIL'}: {bad} run(s) wrong or partial with exit 0")
    return 1 if bad else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=2, help="runs of each scenario (noise ones get one more)")
    ap.add_argument("--parallel", type=int, default=3, help="bisections at once (each on its own port)")
    ap.add_argument("--only", default="", help="comma-separated scenario names")
    ap.add_argument("--trials", action="store_true", help="print what each run launched, config by config")
    a = ap.parse_args()
    sys.exit(asyncio.run(main_async(a.runs, a.parallel, {x for x in a.only.split(",") if x}, a.trials)))


if __name__ == "__main__":
    main()
