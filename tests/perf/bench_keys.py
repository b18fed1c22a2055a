"""Start and key press to screen change, as a user sees it: tmux send-keys, then capture-pane polling.

    python tests/perf/bench_keys.py [--hosts 1,64] [--presses 30] [--lost-after 5] [--busy 4]
                                    [--profile DIR]

For each host count the real TUI runs in a private tmux server on the loopback sshd (aliases of one
sshd, every host connected and refreshing).  Measured from the spawn of the TUI: the first screen
(the app's header and the hosts' names), every host connected, and host data (the first host's GPU
rows); the plain tool for that is one fresh `ssh h0 cat /proc/...; nvidia-smi ...` reading the same
facts, in the same run.  Then keys alternate between two panes (3: Logs, 4: Env) so every press
must change the screen.  Each press is timed from `send-keys` to the first captured screen that
differs from the one before it; a press with no change within `--lost-after` s counts as lost.  The
plain tool for keys, same path, same run: `less` on a numbered file in the same tmux server, `f`/`b`
paging.  `--busy N` runs N busy loops (children of this script, killed at the end) beside the whole
run; `--profile DIR` records the TUI with py-spy while the keys are pressed (one speedscope file
and one `--format raw` file per host count).  Output per host count, then the last line:

    RESULT hosts=1 first_screen_s=.. connected_s=.. data_s=.. fresh_ssh_s=.. p50_ms=.. p90_ms=.. lost=..
           less_p50_ms=.. less_p90_ms=.. ratio_p90=.. ; hosts=64 ...
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.sshd_harness import Sshd, start_sshd  # noqa: E402
from tests.tmux_harness import Tmux  # noqa: E402

BUSY = "while True:\n    pass\n"
FACTS = (
    "cat /proc/loadavg /proc/meminfo /proc/uptime; nvidia-smi "
    "--query-gpu=index,name,utilization.gpu,memory.used,memory.total --format=csv,noheader"
)


def write_config(server: Sshd, path: Path, aliases: list[str]) -> Path:
    """One ssh_config with a Host block per alias, all pointing at the same sshd."""
    parts = []
    for alias in aliases:
        one = server.write_client_config(path.with_suffix(".one"), server.known_hosts, alias=alias)
        parts.append(one.read_text())
    path.write_text("".join(parts))
    return path


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


def wait_screen(tmux: Tmux, name: str, predicate, timeout: float, since: float) -> float:
    """Seconds from `since` to the first captured screen that satisfies `predicate` (polled fast)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate(tmux.screen(name)):
            return time.perf_counter() - since
        time.sleep(0.01)
    raise AssertionError(f"screen never matched; last screen:\n{tmux.screen(name)}")


def app_pid(tmux: Tmux, name: str) -> int:
    """The TUI's python process: the pane's process, or its first python descendant."""
    pid = int(tmux("list-panes", "-t", name, "-F", "#{pane_pid}").stdout.split()[0])
    for _ in range(50):
        todo = [pid]
        while todo:
            p = todo.pop()
            try:
                exe = os.readlink(f"/proc/{p}/exe")
            except OSError:
                exe = ""
            if "python" in os.path.basename(exe):
                return p
            try:
                kids = Path(f"/proc/{p}/task/{p}/children").read_text().split()
            except OSError:
                kids = []
            todo += [int(k) for k in kids]
        time.sleep(0.1)
    raise RuntimeError("no python process in the TUI's pane")


def py_spy() -> str | None:
    return shutil.which("py-spy", path=f"{os.path.dirname(sys.executable)}:{os.environ.get('PATH', '')}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hosts", default="1,64", help="host counts, comma separated")
    ap.add_argument("--presses", type=int, default=30)
    ap.add_argument("--lost-after", type=float, default=5.0)
    ap.add_argument("--busy", type=int, default=0, help="busy loops beside the run (this script's children)")
    ap.add_argument("--profile", metavar="DIR", help="py-spy record the TUI during the presses into DIR")
    ap.add_argument("--settle", type=float, default=5.0, help="seconds after host data before the presses")
    args = ap.parse_args()
    if shutil.which("tmux") is None or shutil.which("less") is None:
        print("needs tmux and less", file=sys.stderr)
        return 2
    spy = py_spy() if args.profile else None
    if args.profile and spy is None:
        print("--profile needs py-spy (pip install py-spy)", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="specdebug-keys-"))
    server = start_sshd(work / "sshd", max_sessions=10)
    numbered = work / "numbered.txt"
    numbered.write_text("".join(f"line {i}\n" for i in range(100_000)))
    tmux = Tmux("specdebug-keys")
    busy = [subprocess.Popen([sys.executable, "-c", BUSY], start_new_session=True) for _ in range(args.busy)]
    print(f"load before: {Path('/proc/loadavg').read_text().strip()}  busy loops: {args.busy}", flush=True)
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
            first = wait_screen(tmux, name, lambda s: "specdebug" in s and "h0" in s, 120, t_start)
            connected = wait_screen(tmux, name, lambda s: "h0 connected" in s, 120, t_start)
            data = wait_screen(tmux, name, lambda s: "H200" in s, 120, t_start)
            t0 = time.perf_counter()  # one fresh ssh reading the same facts, in the same run
            subprocess.run(["ssh", "-F", str(cfg), "h0", FACTS], capture_output=True, check=True)
            fresh = time.perf_counter() - t0
            print(
                f"hosts={n}: first screen {first:.2f} s, h0 connected {connected:.2f} s, host data {data:.2f} s; "
                f"fresh ssh reading the same {fresh:.2f} s: data ratio {data / fresh:.1f}x",
                flush=True,
            )
            time.sleep(args.settle)  # the other hosts connect and start refreshing
            spying = None
            if spy is not None:
                out = Path(args.profile)
                out.mkdir(parents=True, exist_ok=True)
                pid = str(app_pid(tmux, name))
                spying = [
                    subprocess.Popen(
                        [spy, "record", "-p", pid, "-r", "200", "-f", fmt, "-o", str(out / f"keys{n}.{ext}")],
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                    for fmt, ext in (("speedscope", "json"), ("raw", "txt"))
                ]
                time.sleep(1.0)  # py-spy attaches
            t, lost = press_times(tmux, name, ["3", "4"], args.presses, args.lost_after)
            for proc in spying or []:
                proc.send_signal(signal.SIGINT)
                proc.wait(30)
            p50, p90 = pct(t, 50) * 1e3, pct(t, 90) * 1e3
            l50, l90 = pct(less_t, 50) * 1e3, pct(less_t, 90) * 1e3
            print(
                f"hosts={n}: specdebug p50 {p50:.0f} ms p90 {p90:.0f} ms lost {lost}/{args.presses}; "
                f"less p50 {l50:.0f} ms p90 {l90:.0f} ms lost {less_lost}; p90 ratio {p90 / l90:.1f}x",
                flush=True,
            )
            results.append(
                f"hosts={n} first_screen_s={first:.2f} connected_s={connected:.2f} data_s={data:.2f} "
                f"fresh_ssh_s={fresh:.2f} p50_ms={p50:.0f} p90_ms={p90:.0f} lost={lost} "
                f"less_p50_ms={l50:.0f} less_p90_ms={l90:.0f} ratio_p90={p90 / l90:.1f}"
            )
            tmux("kill-session", "-t", name)
    finally:
        for proc in busy:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        tmux.kill()
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(f"load after: {Path('/proc/loadavg').read_text().strip()}")
    print("RESULT " + " ; ".join(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
