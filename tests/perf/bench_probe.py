"""Probe round trip: specdebug's probe channel vs OpenSSH ControlMaster vs a fresh ssh per probe.

    python tests/perf/bench_probe.py [--ssh-config FILE --host ALIAS] [-n N]

Each probe reads /proc/loadavg.  All three run in the same process against the same sshd
(its own loopback sshd and a box user whose shell does nothing at start, tests/perf/cleanbox.py, when
--ssh-config is not given: a shell that works at start would slow only the plain ssh commands).  Last line:
    RESULT probe_ms=X controlmaster_ms=Y fresh_ssh_ms=Z
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.boxes import ssh_box  # noqa: E402


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def probe_channel(cfg: str, host: str, n: int) -> list[float]:
    remote = ssh_box(host, ssh_config=cfg)
    await remote.wait_connected(15)
    for _ in range(20):  # warm up
        await remote.read_files(["/proc/loadavg"])
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        (f,) = await remote.read_files(["/proc/loadavg"])
        samples.append(time.perf_counter() - t0)
        assert f.data
    await remote.close()
    return samples


def ssh_samples(base: list[str], n: int) -> list[float]:
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        r = subprocess.run([*base, "cat", "/proc/loadavg"], capture_output=True)
        samples.append(time.perf_counter() - t0)
        assert r.returncode == 0, r.stderr
    return samples


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ssh-config")
    ap.add_argument("--host", default="gpubox")
    ap.add_argument("-n", type=int, default=200, help="probes per method (fresh ssh uses n/5)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-probe-"))
    box = None
    cfg = args.ssh_config
    if cfg is None:  # a loopback sshd and a box user whose shell does nothing at start
        from tests.perf.cleanbox import clean_box, describe

        box = clean_box()
        clean = box.__enter__()
        cfg, args.host = str(clean.config), clean.alias
        print(describe(clean))
    try:
        probe = asyncio.run(probe_channel(cfg, args.host, args.n))
        control = [
            "ssh",
            "-F",
            cfg,
            "-o",
            "ControlMaster=auto",
            "-o",
            f"ControlPath={tmp}/cm-%C",
            "-o",
            "ControlPersist=60",
            args.host,
        ]
        ssh_samples(control, 3)  # start the master
        cm = ssh_samples(control, args.n)
        subprocess.run(
            ["ssh", "-F", cfg, "-o", f"ControlPath={tmp}/cm-%C", "-O", "exit", args.host], capture_output=True
        )
        fresh = ssh_samples(["ssh", "-F", cfg, args.host], max(10, args.n // 5))
    finally:
        if box is not None:
            box.__exit__(None, None, None)
    p, c, f = median_ms(probe), median_ms(cm), median_ms(fresh)
    print(
        f"probe channel   median {p:8.3f} ms  p90 {statistics.quantiles(probe, n=10)[-1] * 1000:8.3f} ms  (n={len(probe)})"
    )
    print(
        f"ControlMaster   median {c:8.3f} ms  p90 {statistics.quantiles(cm, n=10)[-1] * 1000:8.3f} ms  (n={len(cm)})"
    )
    print(
        f"fresh ssh       median {f:8.3f} ms  p90 {statistics.quantiles(fresh, n=10)[-1] * 1000:8.3f} ms  (n={len(fresh)})"
    )
    print(f"ratios: ControlMaster/probe = {c / p:.1f}x, fresh/probe = {f / p:.1f}x")
    print(f"RESULT probe_ms={p:.3f} controlmaster_ms={c:.3f} fresh_ssh_ms={f:.3f}")


if __name__ == "__main__":
    main()
