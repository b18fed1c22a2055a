"""Scan throughput and memory on a large real-shaped SGLang log, against plain tools in the same run.

    python tests/perf/bench_scan.py [--size-mb 1024] [--dir DIR] [--over-ssh]

Generates a log of --size-mb MiB (mostly `Decode batch` lines, some `Prefill batch` lines and HTTP
access lines, a server start and the ready line, in SGLang's exact format) in a temp dir, runs
`specdebug scan LOG --json` in a child process and reports MB/s and the child's peak RSS
(getrusage of a wrapper that ran only it). For scale, in the same run: `grep -c 'Decode batch'`
and an awk one-liner averaging `accept len` (what a person would type instead). With --over-ssh the
same file is scanned as gpubox:LOG through a loopback sshd (the probe helper reads 1 MiB chunks).
The log is deleted afterwards. The last line printed is `RESULT scan ...`.

To compare with older code in the same session, copy the package with the old files
(`git show main:FILE`) to DIR/specdebug and run this script with PYTHONPATH=DIR from outside the
checkout: `python -m` puts the current directory first on sys.path, so a run from the checkout
measures the checkout's code whatever PYTHONPATH says.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

HEAD = (
    "[2026-01-15 11:59:01] server_args=ServerArgs(model_path='meta-llama/Llama-3.1-8B-Instruct', "
    "speculative_algorithm='EAGLE3', speculative_num_steps=3, port=30000)\n"
    "[2026-01-15 11:59:58] The server is fired up and ready to roll!\n"
)
DECODE = (
    "[2026-01-15 12:{m:02d}:{s:02d} TP0] Decode batch, #running-req: {run}, #token: {tok}, token usage: {use:.2f}, "
    "accept len: {al:.2f}, accept rate: {ar:.2f}, cuda graph: True, gen throughput (token/s): {gt:.2f}, "
    "#queue-req: {q}\n"
)
PREFILL = (
    "[2026-01-15 12:{m:02d}:{s:02d} TP0] Prefill batch, #new-seq: 1, #new-token: {tok}, #cached-token: 0, "
    "token usage: {use:.2f}, #running-req: {run}, #queue-req: {q}\n"
)
ACCESS = '[2026-01-15 12:{m:02d}:{s:02d}] INFO:     127.0.0.1:{port} - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'

_WRAP = (
    "import resource, subprocess, sys, time\n"
    "t = time.monotonic(); r = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE)\n"
    "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "sys.stderr.write('WALL=%f\\n' % (time.monotonic() - t))\n"
    "sys.stderr.write('CPU=%f\\n' % (u.ru_utime + u.ru_stime))\n"
    "sys.stderr.write('PEAK_RSS_KB=%d\\n' % u.ru_maxrss)\n"
    "sys.stdout.buffer.write(r.stdout); sys.exit(r.returncode)\n"
)


def template(rng: random.Random, size: int) -> bytes:
    """About `size` bytes of lines: 90% decode, 5% prefill, 5% access lines."""
    out: list[str] = []
    n = 0
    while n < size:
        m, s = rng.randrange(60), rng.randrange(60)
        r = rng.random()
        if r < 0.90:
            line = DECODE.format(
                m=m,
                s=s,
                run=rng.randrange(1, 64),
                tok=rng.randrange(1000, 300000),
                use=rng.random(),
                al=rng.uniform(1.5, 4.0),
                ar=rng.random(),
                gt=rng.uniform(50, 3000),
                q=rng.randrange(0, 8),
            )
        elif r < 0.95:
            line = PREFILL.format(
                m=m, s=s, tok=rng.randrange(10, 8000), use=rng.random(), run=rng.randrange(64), q=0
            )
        else:
            line = ACCESS.format(m=m, s=s, port=rng.randrange(30000, 60000))
        out.append(line)
        n += len(line)
    return "".join(out).encode()


def generate(path: Path, size_mb: int) -> int:
    block = template(random.Random(7), 4 << 20)
    want = size_mb << 20
    with open(path, "wb") as f:
        f.write(HEAD.encode())
        written = len(HEAD)
        while written < want:
            part = block[: want - written]
            f.write(part)
            written += len(part)
    return written


def timed(cmd: list[str]) -> tuple[float, float, bytes, float]:
    """(wall s, peak RSS MiB, stdout, CPU s) of one child process (CPU: user + system, the child's
    own: on a shared machine wall time measures the neighbours too, CPU time much less)."""
    r = subprocess.run([sys.executable, "-c", _WRAP, *cmd], capture_output=True)
    if r.returncode != 0:
        raise SystemExit(f"{cmd[:4]}... failed ({r.returncode}): {r.stderr.decode()[-2000:]}")
    err = dict(line.split("=", 1) for line in r.stderr.decode().splitlines() if "=" in line)
    return float(err["WALL"]), int(err["PEAK_RSS_KB"]) / 1024, r.stdout, float(err["CPU"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--dir", default=None, help="where to write the log (default: a temp dir)")
    ap.add_argument("--over-ssh", action="store_true", help="also scan it through a loopback sshd")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-scan-", dir=args.dir))
    log = work / "server.log"
    try:
        t0 = time.monotonic()
        size = generate(log, args.size_mb)
        mb = size / 1e6
        print(f"generated {size / (1 << 20):.0f} MiB in {time.monotonic() - t0:.1f} s: {log}")
        wall, rss, out, cpu = timed([sys.executable, "-m", "specdebug.cli", "scan", str(log), "--json"])
        res = json.loads(out)
        al = res["metrics"]["accept_len"]
        print(
            f"specdebug scan: {wall:.1f} s, {mb / wall:.1f} MB/s, {cpu:.1f} CPU s = {mb / cpu:.1f} MB per CPU s, "
            f"{res['lines'] / wall / 1e3:.0f}k lines/s, peak RSS {rss:.0f} MiB; lines {res['lines']}, "
            f"accept_len n={al['n']} mean={al['mean']:.3f}"
        )
        g_wall, g_rss, _, g_cpu = timed(["grep", "-c", "Decode batch", str(log)])
        print(
            f"grep -c 'Decode batch': {g_wall:.1f} s, {mb / g_wall:.1f} MB/s, {mb / max(g_cpu, 1e-3):.0f} MB per CPU s"
        )
        awk = '/Decode batch/ { for (i = 1; i < NF; i++) if ($i == "len:") { s += $(i + 1); n++ } } END { print s / n }'
        per_cpu: dict[str, float] = {}
        for tool in dict.fromkeys(t for t in ("mawk", "awk", "gawk") if shutil.which(t)):
            path = str(Path(shutil.which(tool) or tool).resolve())
            if path in per_cpu:
                print(f"{tool}: the same program as {path}")
                continue
            a_wall, a_rss, a_out, a_cpu = timed([tool, awk, str(log)])
            per_cpu[path] = mb / a_cpu
            print(
                f"{tool} ({path}) mean of accept len: {a_wall:.1f} s, {mb / a_wall:.1f} MB/s, {a_cpu:.1f} CPU s = "
                f"{mb / a_cpu:.1f} MB per CPU s (mean {a_out.decode().strip()}); specdebug scan per CPU s is "
                f"{(mb / cpu) / (mb / a_cpu):.2f}x of it (goal >= 0.5)"
            )
        best = max(per_cpu.values()) if per_cpu else float("nan")
        ssh = ""
        if args.over_ssh:
            from tests.sshd_harness import start_sshd

            sshd = start_sshd(work / "sshd")
            try:
                s_wall, s_rss, out, _ = timed(
                    [
                        sys.executable,
                        "-m",
                        "specdebug.cli",
                        "scan",
                        "-F",
                        str(sshd.config_path),
                        f"gpubox:{log}",
                        "--json",
                    ]
                )
            finally:
                sshd.stop()
            assert json.loads(out)["lines"] == res["lines"]
            print(
                f"specdebug scan over ssh: {s_wall:.1f} s, {mb / s_wall:.1f} MB/s, peak RSS {s_rss:.0f} MiB"
            )
            ssh = f" ssh_mb_s={mb / s_wall:.1f} ssh_peak_rss_mib={s_rss:.0f}"
        print(
            f"RESULT scan size_mb={mb:.0f} mb_s={mb / wall:.1f} mb_per_cpu_s={mb / cpu:.1f} "
            f"lines_s={res['lines'] / wall:.0f} peak_rss_mib={rss:.0f} grep_c_mb_s={mb / g_wall:.1f} "
            f"awk_mb_per_cpu_s={best:.1f} ratio_per_cpu_vs_awk={(mb / cpu) / best:.2f}{ssh}"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
