"""Key press to screen change, as a user sees it: tmux send-keys, then capture-pane polling.

    python tests/perf/bench_keys.py [--hosts 1,64] [--presses 30] [--lost-after 5]

For each host count the real TUI runs in a private tmux server on the loopback sshd (aliases of one
sshd, every host connected and refreshing); keys alternate between two panes (3: Logs, 4: Env) so
every press must change the screen. Each press is timed from `send-keys` to the first captured
screen that differs from the one before it; a press with no change within `--lost-after` s counts
as lost. The plain tool, same path, same run: `less` on a numbered file in the same tmux server,
`f`/`b` paging. Output per host count, then the last line:

    RESULT hosts=1 p50_ms=.. p90_ms=.. lost=.. less_p50_ms=.. less_p90_ms=.. ratio_p90=.. ; hosts=64 ...
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.perf.bench_hosts import write_config  # noqa: E402
from tests.sshd_harness import start_sshd  # noqa: E402
from tests.tmux_harness import Tmux  # noqa: E402


def press_times(
    tmux: Tmux, name: str, keys: list[str], presses: int, lost_after: float
) -> tuple[list[float], int]:
    """Seconds from each key to a changed screen, and how many keys changed nothing."""
    times, lost = [], 0
    before = tmux.screen(name)
    for i in range(presses):
        key = keys[i % len(keys)]
        t0 = time.perf_counter()
        tmux("send-keys", "-t", name, key)
        while True:
            now = tmux.screen(name)
            dt = time.perf_counter() - t0
            if now != before:
                times.append(dt)
                break
            if dt > lost_after:
                lost += 1
                break
        before = now
        time.sleep(0.15)  # a person's pace: the screen settles between presses
        before = tmux.screen(name)
    return times, lost


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hosts", default="1,64", help="host counts, comma separated")
    ap.add_argument("--presses", type=int, default=30)
    ap.add_argument("--lost-after", type=float, default=5.0)
    args = ap.parse_args()
    if shutil.which("tmux") is None or shutil.which("less") is None:
        print("needs tmux and less", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="specdebug-keys-"))
    server = start_sshd(work / "sshd", max_sessions=10)
    numbered = work / "numbered.txt"
    numbered.write_text("".join(f"line {i}\n" for i in range(100_000)))
    tmux = Tmux("specdebug-keys")
    results = []
    try:
        tmux.new_session("less", f"less {numbered}", 150, 45)
        tmux.wait_screen("less", lambda s: "line 0" in s, 20)
        less_t, less_lost = press_times(tmux, "less", ["f", "b"], args.presses, args.lost_after)
        for n in [int(x) for x in args.hosts.split(",")]:
            aliases = [f"h{i}" for i in range(n)]
            cfg = write_config(server, work / f"ssh_config_{n}", aliases)
            home = work / f"home{n}"
            home.mkdir()
            name = f"tui{n}"
            t_start = time.perf_counter()
            tmux.new_session(
                name,
                f"env HOME={home} {sys.executable} -m specdebug.cli -F {cfg} {' '.join(aliases)} "
                f"--session {work / f'session{n}'}",
                150,
                45,
            )
            tmux.wait_screen(name, lambda s: "h0 connected" in s, 120)
            if n == 1:  # cold start to host data (the GPU rows) against one fresh ssh reading the same
                tmux.wait_screen(name, lambda s: "H200" in s, 120)
                cold = time.perf_counter() - t_start
                t0 = time.perf_counter()
                subprocess.run(
                    [
                        "ssh",
                        "-F",
                        str(cfg),
                        "h0",
                        "cat /proc/loadavg /proc/meminfo /proc/uptime; nvidia-smi "
                        "--query-gpu=index,name,utilization.gpu,memory.used,memory.total --format=csv,noheader",
                    ],
                    capture_output=True,
                    check=True,
                )
                fresh = time.perf_counter() - t0
                print(
                    f"cold start to host data: specdebug {cold:.2f} s, fresh ssh reading the same "
                    f"{fresh:.2f} s, ratio {cold / fresh:.1f}x (goal <= 2x)",
                    flush=True,
                )
                results.append(f"cold_s={cold:.2f} fresh_ssh_s={fresh:.2f} cold_ratio={cold / fresh:.1f}")
            time.sleep(5 if n > 1 else 1)  # the other hosts connect and start refreshing
            t, lost = press_times(tmux, name, ["3", "4"], args.presses, args.lost_after)
            p50, p90 = pct(t, 50) * 1e3, pct(t, 90) * 1e3
            l50, l90 = pct(less_t, 50) * 1e3, pct(less_t, 90) * 1e3
            print(
                f"hosts={n}: specdebug p50 {p50:.0f} ms p90 {p90:.0f} ms lost {lost}/{args.presses}; "
                f"less p50 {l50:.0f} ms p90 {l90:.0f} ms lost {less_lost}; p90 ratio {p90 / l90:.1f}x",
                flush=True,
            )
            results.append(
                f"hosts={n} p50_ms={p50:.0f} p90_ms={p90:.0f} lost={lost} less_p50_ms={l50:.0f} "
                f"less_p90_ms={l90:.0f} ratio_p90={p90 / l90:.1f}"
            )
            tmux("kill-session", "-t", name)
    finally:
        tmux.kill()
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    print("RESULT " + " ; ".join(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
