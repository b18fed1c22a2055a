"""CLI start: `specdebug --help` and `specdebug probe --json` against `ssh box cat /proc/loadavg`.

    python tests/perf/bench_cli.py [--ssh-config FILE --host ALIAS] [-n N]

Whole processes, timed from spawn to exit, interleaved (A, B, C, A, B, C, ...) so a loaded machine
slows all of them alike; against its own loopback OpenSSH sshd unless --ssh-config is given.
Goals (issue 16): `--help` under 0.15 s; `probe --json` within 2x of the ssh command.  Prints
medians and ratios; last line:
    RESULT cli help_s=X probe_s=Y ssh_s=Z python_s=P probe_over_ssh=R
(`python_s`: a bare `python -c pass`, the floor any Python CLI starts from.)
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def timed(argv: list[str]) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL, cwd=REPO)
    took = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"{argv[:4]}... exited {r.returncode}: {r.stderr.decode()[-500:]}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ssh-config", help="ssh config with the host (default: a loopback sshd of its own)")
    ap.add_argument("--host", default="gpubox", help="host alias in the ssh config (default %(default)s)")
    ap.add_argument("-n", type=int, default=15, help="runs of each command (default %(default)s)")
    args = ap.parse_args()
    server = None
    cfg = args.ssh_config
    if cfg is None:
        from tests.sshd_harness import start_sshd

        server = start_sshd(Path(tempfile.mkdtemp(prefix="bench-cli-")) / "sshd")
        cfg = str(server.config_path)
    commands = {
        "python": [sys.executable, "-c", "pass"],
        "help": [sys.executable, "-m", "specdebug.cli", "--help"],
        "probe": [sys.executable, "-m", "specdebug.cli", "probe", "-F", cfg, args.host, "--json"],
        "ssh": ["ssh", "-F", cfg, "-o", "BatchMode=yes", args.host, "cat", "/proc/loadavg"],
    }
    try:
        for argv in commands.values():  # warm the page cache and the box side once
            timed(argv)
        samples: dict[str, list[float]] = {k: [] for k in commands}
        for _ in range(args.n):
            for name, argv in commands.items():
                samples[name].append(timed(argv))
    finally:
        if server is not None:
            server.stop()
    med = {k: statistics.median(v) for k, v in samples.items()}
    print(f"{'command':<8}{'median s':>10}{'min s':>8}{'max s':>8}")
    for name, values in samples.items():
        print(f"{name:<8}{med[name]:>10.3f}{min(values):>8.3f}{max(values):>8.3f}")
    ratio = med["probe"] / med["ssh"]
    print(f"--help: {med['help']:.3f} s (goal < 0.15 s; bare python {med['python']:.3f} s)")
    print(f"probe --json / ssh cat /proc/loadavg: {ratio:.2f}x (goal <= 2x)")
    print(
        f"RESULT cli help_s={med['help']:.3f} probe_s={med['probe']:.3f} ssh_s={med['ssh']:.3f} "
        f"python_s={med['python']:.3f} probe_over_ssh={ratio:.2f}"
    )


if __name__ == "__main__":
    main()
