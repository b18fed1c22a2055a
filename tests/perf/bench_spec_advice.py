"""The speculation advisor (issue 42) against the sim, whose cost model is known.

For each shape a session is measured on the sim (the plain-decode baseline and two speculative
configs), `advise` predicts tok/s for each depth of its grid, and then every candidate depth is run
and measured on the sim too, so the truth is known: the advised depth must be the truly fastest
one, and each prediction within 10 % of the measured tok/s.  The candidates are measured with the
healthy env (the NCCL tuning vars): the advice is for the box without a config's other problem.

Shapes: the story (SGLang EAGLE-3 topk 1: 2-step with the NCCL env, 3-step without: its verify is
the story's slow one), a cheap drafter with high acceptance, an expensive verify, acceptance that
drops fast with depth, and the vLLM flavour (no verify time logged: whole stream cycles).

    python tests/perf/bench_spec_advice.py [--only NAME,...] [--output-len 320]

The box is this machine (core's local transport); nothing outside 127.0.0.1 is contacted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from specdebug.core.bench.runner import BenchRequest, run_benchmark  # noqa: E402
from specdebug.core.journal import Journal  # noqa: E402
from specdebug.core.profiles import load_profile  # noqa: E402
from specdebug.core.report import baseline_of, history  # noqa: E402
from specdebug.core.spec.advise import Advice, advise  # noqa: E402
from specdebug.sim.box import local as sim_local  # noqa: E402
from tests.boxes import local_box  # noqa: E402
from tests.security.boxkit import unique, write_profile  # noqa: E402

NCCL = {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "NCCL_P2P_LEVEL": "SYS"}
SGLANG = ["--model-path", "moonshotai/Kimi-K2-Instruct", "--tp", "8", "--profile-verify", "--enable-metrics"]
DRAFTER = "yuhuili/EAGLE3-LLaMA3.1-Instruct-70B"
TOLERANCE = 0.10


@dataclass
class Shape:
    name: str
    costs: list[str]  # sim cost flags
    measured: list[tuple[int, bool]]  # (depth, NCCL env?) run before the advice
    vllm: bool = False
    notes: str = ""
    rows: list[dict] = field(default_factory=list)
    baseline: float | None = None  # plain decode, measured in the session (depth 0)


SHAPES = [
    Shape("story", [], [(2, True), (3, False)], notes="2-step with NCCL env, 3-step without"),
    Shape("cheap-drafter", ["--draft-step-ms", "0.3", "--accept", "0.9,0.88,0.86,0.84,0.82"], [(2, True), (4, True)]),
    Shape("expensive-verify", ["--verify-per-token-ms", "5"], [(2, True), (4, True)]),
    Shape("fast-drop", ["--accept", "0.75,0.35,0.2"], [(2, True), (4, True)]),
    Shape("vllm-stream", [], [(1, True), (3, True)], vllm=True, notes="vLLM flavour: no verify time logged"),
]  # fmt: skip


def sim_args(shape: Shape, depth: int) -> list[str]:
    if shape.vllm:
        args = ["--engine", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "-tp", "1", *shape.costs]
        if depth:
            spec = {"method": "eagle3", "model": DRAFTER, "num_speculative_tokens": depth}
            args += ["--speculative-config", json.dumps(spec)]
        return args
    args = [*SGLANG, *shape.costs]
    if not depth:
        return [*args, "--speculative-algorithm", "NONE"]
    return [
        *args, "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "lmsys/eagle3",
        "--speculative-num-steps", str(depth), "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", str(depth + 1),
    ]  # fmt: skip


async def measure(
    remote, work: Path, shape: Shape, depth: int, nccl: bool, journal: Journal | None, output_len: int
) -> tuple[float | None, Path]:
    """Start the sim at `depth` (0: no speculation), benchmark it, stop it: (decode tok/s, profile)."""
    name = unique(f"{shape.name}-d{depth}{'' if nccl else '-nonccl'}")
    log = work / f"{name}.log"
    env = NCCL if nccl else {}
    args = sim_args(shape, depth)
    with sim_local.start_local_sim(args, log_file=log, time_scale=0.02, extra_env=env) as sim:
        sim.wait_ready(120)
        server = {
            "argv": ["python3", "-m", "specdebug.sim", *args],
            "port": sim.port,
            "log_file": str(log),
            "kind": "vllm" if shape.vllm else "sglang",
            "env": env,
        }
        path = write_profile(work / f"{name}.toml", name, server)
        req = BenchRequest(requests=2, output_len=output_len, input_len=32)
        res = await run_benchmark(remote, load_profile(path), req, journal=journal, host="local")
        return (res.decode_tok_s if res.status == "done" else None), path


async def run_shape(remote, work: Path, shape: Shape, output_len: int) -> Advice:
    journal = Journal(work / f"session-{shape.name}")
    shape.baseline, _ = await measure(remote, work, shape, 0, True, journal, output_len)
    current = None
    for depth, nccl in shape.measured:
        _, current = await measure(remote, work, shape, depth, nccl, journal, output_len)
    events = journal.records()
    entries = history(events)
    profile = load_profile(current) if current else None
    assert profile is not None
    adv = advise(
        entries, baseline_of(events, entries), profile.name, profile.server.argv, profile.fingerprint()
    )
    for c in adv.candidates:
        truth, _ = await measure(remote, work, shape, c.depth, True, None, output_len)
        err = (c.predicted_tok_s / truth - 1) if c.predicted_tok_s and truth else None
        inside = c.low is not None and c.high is not None and truth is not None and c.low <= truth <= c.high
        shape.rows.append(
            {"depth": c.depth, "predicted": c.predicted_tok_s, "low": c.low, "high": c.high,
             "measured": truth, "error": err, "inside": inside, "extrapolated": c.extrapolated,
             "in_session": c.measured_by is not None}
        )  # fmt: skip
    return adv


def fmt(v: float | None, spec: str = ".1f") -> str:
    return "?" if v is None else format(v, spec)


def report(shape: Shape, adv: Advice) -> bool:
    print(f"\n## {shape.name}: {shape.notes or ' '.join(shape.costs) or 'the story box'}")
    print(
        f"measured in the session: baseline, {', '.join(f'depth {d}' + ('' if n else ' (no NCCL env)') for d, n in shape.measured)}"
    )
    print(f"cycle model: {adv.cycle_model}")
    for line in adv.left_out:
        print(f"left out: {line}")
    print(f"{'depth':>5} {'predicted':>9} {'low':>7} {'high':>7} {'measured':>8} {'error':>7}  in-interval")
    for r in shape.rows:
        mark = (" (in session)" if r["in_session"] else "") + (" (extrapolated)" if r["extrapolated"] else "")
        print(
            f"{r['depth']:>5} {fmt(r['predicted']):>9} {fmt(r['low']):>7} {fmt(r['high']):>7} "
            f"{fmt(r['measured']):>8} {fmt(r['error'] * 100 if r['error'] is not None else None, '+.1f'):>6}%  "
            f"{'yes' if r['inside'] else 'NO'}{mark}"
        )
    print(f"{0:>5} {'-':>9} {'-':>7} {'-':>7} {fmt(shape.baseline):>8}      -   (plain decode, in session)")
    plain = [{"depth": 0, "measured": shape.baseline}] if shape.baseline else []
    truth = max([*(r for r in shape.rows if r["measured"]), *plain], key=lambda r: r["measured"])
    best = 0 if adv.speculation_pays is False else (adv.best.depth if adv.best else None)
    ok_best = best == truth["depth"]
    ok_err = all(r["error"] is not None and abs(r["error"]) <= TOLERANCE for r in shape.rows)
    print(f"advice: {adv.verdict}; measure next: {adv.measure_next}")
    print(
        f"advised depth {best} (0: no speculation), truly fastest {truth['depth']} ({truth['measured']:.1f} tok/s): "
        f"{'RIGHT' if ok_best else 'WRONG'}; every prediction within {TOLERANCE * 100:.0f} %: {'yes' if ok_err else 'NO'}"
    )
    return ok_best and ok_err


async def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="")
    ap.add_argument("--output-len", type=int, default=320)
    args = ap.parse_args()
    chosen = [s for s in SHAPES if not args.only or s.name in args.only.split(",")]
    work = Path(tempfile.mkdtemp(prefix="advice-"))
    remote = local_box()
    ok = True
    try:
        await remote.start()
        await remote.wait_connected(20)
        for shape in chosen:
            adv = await run_shape(remote, work, shape, args.output_len)
            ok = report(shape, adv) and ok
    finally:
        await remote.close()
    print(f"\n{'ALL RIGHT' if ok else 'SOME WRONG'} ({len(chosen)} shapes)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
