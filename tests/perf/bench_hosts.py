"""Many hosts: the TUI with 64 hosts (aliases of one loopback sshd) refreshing once a second.

    python tests/perf/bench_hosts.py [--hosts 64] [--seconds 20] [--presses 40]

specdebug: the app runs in-process (Textual Pilot, headless) with every host connected and the hosts
pane refreshing each host once a second (load, memory, uptime, GPUs via the fake nvidia-smi).  Measured:
  client CPU   this process's CPU time over the window, in % of one core
  key latency  from a key press (cursor down/up in the hosts table) to the table's cursor moving, and
               to the table's lines being drawn again (the compositor renders the new frame), while the hosts refresh
  cell writes  cells the hosts table wrote per refresh round (only changed cells are written)
Plain tool, same run: one warm ControlMaster per alias and, once a second, `ssh ALIAS cat /proc/loadavg
/proc/meminfo /proc/uptime` for every alias (what a watch script does): its CPU (ssh clients) in % of one
core.  Last line:
    RESULT hosts=64 client_cpu_pct=X plain_ssh_cpu_pct=Y cpu_ratio=X/Y key_p50_ms=.. key_p90_ms=.. ...
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from textual.widgets import DataTable  # noqa: E402

from specdebug.remote.api import ConnState  # noqa: E402
from specdebug.tui.app import SpecdebugApp  # noqa: E402
from specdebug.tui.context import AppContext  # noqa: E402
from specdebug.tui.panes import hosts as hosts_pane  # noqa: E402
from tests.boxes import ssh_box  # noqa: E402


def write_config(server, path: Path, aliases: list[str]) -> Path:
    """One ssh_config with a Host block per alias, all pointing at the same sshd."""
    parts = []
    for alias in aliases:
        one = server.write_client_config(path.with_suffix(".one"), server.known_hosts, alias=alias)
        parts.append(one.read_text())
    path.write_text("".join(parts))
    return path


async def run_tui(cfg: Path, aliases: list[str], seconds: float, presses: int) -> dict:
    hosts_pane.REFRESH_S = 1.0
    remotes = {a: ssh_box(a, ssh_config=cfg) for a in aliases}
    app = SpecdebugApp(AppContext(remotes=remotes, selected=aliases[0]))
    out: dict = {}
    async with app.run_test(size=(160, 90)) as pilot:
        pane = app.query_one(hosts_pane.HostsPane)
        deadline = time.monotonic() + 120
        while len(pane.infos) < len(aliases) and time.monotonic() < deadline:
            await pilot.pause(0.2)
        out["live"] = sum(1 for r in remotes.values() if r.status.state is ConnState.CONNECTED)
        out["with_info"] = len(pane.infos)
        table = app.query_one("#hosts-table", DataTable)
        table.focus()
        drawn: list[float] = []
        real_render = table.render_lines

        def render_lines(crop):  # the compositor asks the table for its lines: the frame changes
            drawn.append(time.perf_counter())
            return real_render(crop)

        table.render_lines = render_lines
        await pilot.pause(2.0)
        cells0, cpu0, t0 = pane.cell_updates, time.process_time(), time.monotonic()
        moved, idle = [], []
        gap = seconds / max(presses, 1)
        for i in range(presses):
            await asyncio.sleep(gap * 0.8)
            before = table.cursor_row
            key = "down" if i % 2 == 0 else "up"
            start = time.perf_counter()
            press = asyncio.ensure_future(pilot.press(key))
            while table.cursor_row == before and not press.done():
                await asyncio.sleep(0)
            at = time.perf_counter()
            moved.append(at - start)
            while not any(t > at for t in drawn[-3:]) and time.perf_counter() - start < 5:
                await asyncio.sleep(0.0005)  # the first frame drawn after the cursor moved shows it
            idle.append(next((t for t in drawn[-3:] if t > at), time.perf_counter()) - start)
            await press
        wall = time.monotonic() - t0
        out["cpu_pct"] = (time.process_time() - cpu0) / wall * 100
        out["cells_per_round"] = (pane.cell_updates - cells0) / wall  # rounds are once a second
        out["moved"], out["idle"] = moved, idle
    return out


def plain_ssh(cfg: Path, aliases: list[str], tmp: Path, seconds: float) -> float:
    """CPU of the ssh clients of a once-a-second `ssh ALIAS cat ...` round over warm ControlMasters."""
    opts = ["-F", str(cfg), "-o", "ControlMaster=auto", "-o", f"ControlPath={tmp}/cm-%C"]
    opts += ["-o", "ControlPersist=120"]
    for a in aliases:
        subprocess.run(["ssh", *opts, a, "true"], capture_output=True)
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    rounds = 0
    while time.monotonic() - t0 < seconds:
        start = time.monotonic()
        procs = [
            subprocess.Popen(
                ["ssh", *opts, a, "cat", "/proc/loadavg", "/proc/meminfo", "/proc/uptime"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for a in aliases
        ]
        for p in procs:
            p.wait()
        rounds += 1
        time.sleep(max(0.0, 1.0 - (time.monotonic() - start)))
    wall = time.monotonic() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    for a in aliases:
        subprocess.run(
            ["ssh", "-F", str(cfg), "-o", f"ControlPath={tmp}/cm-%C", "-O", "exit", a], capture_output=True
        )
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return cpu / wall * 100


def pct(samples: list[float], q: float) -> float:
    return statistics.quantiles(samples, n=100)[int(q) - 1] * 1000 if len(samples) > 1 else samples[0] * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--presses", type=int, default=40)
    args = ap.parse_args()
    from tests.sshd_harness import start_sshd

    tmp = Path(tempfile.mkdtemp(prefix="bench-hosts-"))
    server = start_sshd(tmp / "sshd", max_sessions=10)
    aliases = [f"box{i:02d}" for i in range(args.hosts)]
    cfg = write_config(server, tmp / "ssh_config", aliases)
    print(f"load average before: {os.getloadavg()}")
    try:
        tui = asyncio.run(run_tui(cfg, aliases, args.seconds, args.presses))
        plain = plain_ssh(cfg, aliases, tmp, args.seconds)
    finally:
        server.stop()
    print(f"load average after:  {os.getloadavg()}")
    moved, idle = tui["moved"], tui["idle"]
    print(f"hosts live {tui['live']}/{args.hosts}, with facts {tui['with_info']}")
    print(
        f"specdebug TUI client CPU {tui['cpu_pct']:.1f}% of a core;  plain ssh round CPU {plain:.1f}% of a core"
    )
    print(
        f"key press -> cursor moved  p50 {pct(moved, 50):.1f} ms  p90 {pct(moved, 90):.1f} ms  max {max(moved) * 1000:.1f} ms"
    )
    print(
        f"key press -> table redrawn p50 {pct(idle, 50):.1f} ms  p90 {pct(idle, 90):.1f} ms  max {max(idle) * 1000:.1f} ms"
    )
    print(f"hosts-table cells written per refresh round: {tui['cells_per_round']:.1f} (of {args.hosts * 9})")
    print(
        f"RESULT hosts={args.hosts} live={tui['live']} client_cpu_pct={tui['cpu_pct']:.1f} plain_ssh_cpu_pct={plain:.1f} "
        f"cpu_ratio={tui['cpu_pct'] / plain:.2f} key_p50_ms={pct(moved, 50):.1f} key_p90_ms={pct(moved, 90):.1f} "
        f"drawn_p50_ms={pct(idle, 50):.1f} drawn_p90_ms={pct(idle, 90):.1f} cells_per_round={tui['cells_per_round']:.1f}"
    )


if __name__ == "__main__":
    main()
