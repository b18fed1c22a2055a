"""CLI start and the kept connection: `specdebug --help`, `probe --json` cold and warm, against plain ssh.

    python tests/perf/bench_cli.py [-n N] [--command PATH | --python-m]

Whole processes, timed from spawn to exit, interleaved (each round runs every command once) so a loaded
machine slows all of them alike.  The box is a loopback sshd and a box user whose shell does nothing at
start (tests/perf/cleanbox.py; root's ~/.bashrc would add its own start-up to every plain ssh).
specdebug runs as users run it: the installed `specdebug` command beside this Python (scripts/specdebug;
--command PATH for another install, e.g. an older checkout's venv; --python-m: `python -m specdebug.cli`,
as this script ran it before 2026-12-06, which adds runpy's imports).
  python      `python -c pass`: the floor of any Python CLI
  help        `specdebug --help`                                          (goal < 0.15 s)
  cold        `specdebug probe box --json --no-agent`: connect, probe, close  (goal <= 1.5x fresh)
  fresh       `ssh box cat /proc/loadavg`, a new connection each time
  warm        `specdebug probe box --json` answered by the local agent    (goal <= 1.5x cm)
  cm          `ssh boxcm cat /proc/loadavg` through a warm ControlMaster
  status      `specdebug status box -c P --json` answered by the agent        (goal <= 1.5x status_cm)
  status_cm   `ssh boxcm curl -s http://127.0.0.1:PORT/health` through the warm ControlMaster
  status_cold `specdebug status ... --no-agent`: a profile whose port a box process holds (the system's
              ssh, remote/openssh.py)
  status_cold_asyncssh  the same with SPECDEBUG_OPENSSH=0 (asyncssh, as before)
  status_ssh  `ssh box curl -s http://127.0.0.1:PORT/health`: the same question by hand, fresh ssh
  env         `specdebug env box --pid N --expect K=V --json` answered by the agent (goal <= 1.5x env_cm)
  env_cm      `ssh boxcm cat /proc/N/environ` through the warm ControlMaster
  env_cold    `specdebug env ... --no-agent`: one worker's env checked (the system's ssh)
  env_cold_asyncssh     the same with SPECDEBUG_OPENSSH=0
  env_ssh     `ssh box cat /proc/N/environ`: the same by hand, fresh ssh    (goal <= 1.5x each cold)
The box process is a `python3 -m http.server` the box user starts (its own process, as a server
started by hand), answering /health; it is ended with the box user.
Last line:
    RESULT cli help_s=.. cold_s=.. fresh_s=.. warm_s=.. cm_s=.. cold_over_fresh=.. warm_over_cm=..
        status_over_ssh=.. env_over_ssh=.. status_warm_over_cm=.. env_warm_over_cm=..
Connects only to 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.perf.cleanbox import clean_box, describe  # noqa: E402


def timed(argv: list[str], env: dict[str, str], ok: tuple[int, ...] = (0,)) -> float:
    extra = {}
    while argv and "=" in argv[0] and argv[0].split("=", 1)[0].isupper():  # VAR=value before the command
        name, value = argv[0].split("=", 1)
        extra[name], argv = value, argv[1:]
    t0 = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL, cwd=REPO, env={**env, **extra})
    took = time.perf_counter() - t0
    if r.returncode not in ok:
        raise SystemExit(f"{argv[:5]}... exited {r.returncode}: {r.stderr.decode()[-500:]}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=15, help="rounds (default %(default)s)")
    ap.add_argument("--command", help="the specdebug command to time (default: the one beside this Python)")
    ap.add_argument("--python-m", action="store_true", help="time `python -m specdebug.cli` instead")
    args = ap.parse_args()
    run = Path(tempfile.mkdtemp(prefix="bench-cli-run-"))
    run.chmod(0o700)
    env = {k: v for k, v in os.environ.items() if k != "SPECDEBUG_NO_AGENT"}
    env["XDG_RUNTIME_DIR"] = str(run)  # this script's own agent, stopped at the end
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # a user's install has its .pyc files: compiling is not the cost
    beside = Path(sys.executable).with_name("specdebug")
    if args.python_m:
        sd = [sys.executable, "-m", "specdebug.cli"]
    else:
        sd = [args.command or str(beside)]
    print(f"specdebug as: {' '.join(sd)}; load before: {open('/proc/loadavg').read().strip()}")
    with clean_box() as box:
        cfg = str(box.config)
        port, pid = _start_box_server(cfg, box.alias, run)
        profile = run / "p.toml"
        profile.write_text(
            '[server]\nargv = ["python3", "-m", "http.server"]\n'
            f'port = {port}\nlog_file = "/tmp/bench-cli-{port}.log"\n'
        )
        profile.chmod(0o644)
        status_argv = ["status", "-F", cfg, box.alias, "-c", str(profile), "--json"]
        env_argv = ["env", "-F", cfg, box.alias, "--pid", str(pid), "--expect", "BENCH_CLI=1", "--json"]
        commands = {
            "python": [sys.executable, "-c", "pass"],
            "help": [*sd, "--help"],
            "cold": [*sd, "probe", "-F", cfg, box.alias, "--json", "--no-agent"],
            "fresh": ["ssh", "-F", cfg, box.alias, "cat", "/proc/loadavg"],
            "warm": [*sd, "probe", "-F", cfg, box.alias, "--json"],
            "cm": ["ssh", "-F", cfg, box.cm_alias, "cat", "/proc/loadavg"],
            "status": [*sd, *status_argv],
            "status_cm": ["ssh", "-F", cfg, box.cm_alias, "curl", "-s", f"http://127.0.0.1:{port}/health"],
            "status_cold": [*sd, *status_argv, "--no-agent"],
            "status_cold_asyncssh": ["SPECDEBUG_OPENSSH=0", *sd, *status_argv, "--no-agent"],
            "status_ssh": ["ssh", "-F", cfg, box.alias, "curl", "-s", f"http://127.0.0.1:{port}/health"],
            "env": [*sd, *env_argv],
            "env_cm": ["ssh", "-F", cfg, box.cm_alias, "cat", f"/proc/{pid}/environ"],
            "env_cold": [*sd, *env_argv, "--no-agent"],
            "env_cold_asyncssh": ["SPECDEBUG_OPENSSH=0", *sd, *env_argv, "--no-agent"],
            "env_ssh": ["ssh", "-F", cfg, box.alias, "cat", f"/proc/{pid}/environ"],
        }
        try:
            # `status` of a server specdebug did not launch says so with exit 1: its answer, not a failure
            ok = {
                name: (0, 1) if name.startswith("status_c") or name == "status" else (0,) for name in commands
            }
            for name, argv in commands.items():  # warm the page cache, start the agent and the ControlMaster
                timed(argv, env, ok[name])
            _wait_for_agent(sd, env, box.alias)
            samples: dict[str, list[float]] = {k: [] for k in commands}
            for _ in range(args.n):
                for name, argv in commands.items():
                    samples[name].append(timed(argv, env, ok[name]))
        finally:
            subprocess.run([*sd, "agent", "stop"], env=env, capture_output=True)
            _kill_agent(run)
    med = {k: statistics.median(v) for k, v in samples.items()}
    print(describe(box))
    print(f"load after: {open('/proc/loadavg').read().strip()}")
    print(f"{'command':<22}{'median s':>10}{'min s':>8}{'max s':>8}")
    for name, values in samples.items():
        print(f"{name:<22}{med[name]:>10.3f}{min(values):>8.3f}{max(values):>8.3f}")
    cold, warm = med["cold"] / med["fresh"], med["warm"] / med["cm"]
    print(f"--help: {med['help']:.3f} s (goal < 0.15 s; bare python {med['python']:.3f} s)")
    print(f"cold probe / fresh ssh: {cold:.2f}x (goal <= 1.5x)")
    print(f"warm probe (agent) / ssh through a warm ControlMaster: {warm:.2f}x (goal <= 1.5x)")
    status, env_ = med["status_cold"] / med["status_ssh"], med["env_cold"] / med["env_ssh"]
    status_warm, env_warm = med["status"] / med["status_cm"], med["env"] / med["env_cm"]
    print(f"cold status / fresh ssh curl /health: {status:.2f}x (goal <= 1.5x)")
    print(f"cold env / fresh ssh cat /proc/PID/environ: {env_:.2f}x (goal <= 1.5x)")
    status_a, env_a = (
        med["status_cold_asyncssh"] / med["status_ssh"],
        med["env_cold_asyncssh"] / med["env_ssh"],
    )
    print(f"  the same through asyncssh (SPECDEBUG_OPENSSH=0): status {status_a:.2f}x, env {env_a:.2f}x")
    print(f"warm status (agent) / ControlMaster ssh curl /health: {status_warm:.2f}x (goal <= 1.5x)")
    print(f"warm env (agent) / ControlMaster ssh cat /proc/PID/environ: {env_warm:.2f}x (goal <= 1.5x)")
    print(
        f"RESULT cli help_s={med['help']:.3f} cold_s={med['cold']:.3f} fresh_s={med['fresh']:.3f} "
        f"warm_s={med['warm']:.3f} cm_s={med['cm']:.3f} python_s={med['python']:.3f} "
        f"status_s={med['status']:.3f} status_cm_s={med['status_cm']:.3f} "
        f"status_cold_s={med['status_cold']:.3f} status_ssh_s={med['status_ssh']:.3f} "
        f"env_s={med['env']:.3f} env_cm_s={med['env_cm']:.3f} env_cold_s={med['env_cold']:.3f} "
        f"env_ssh_s={med['env_ssh']:.3f} status_cold_asyncssh_s={med['status_cold_asyncssh']:.3f} "
        f"env_cold_asyncssh_s={med['env_cold_asyncssh']:.3f} cold_over_fresh={cold:.2f} warm_over_cm={warm:.2f} "
        f"status_over_ssh={status:.2f} env_over_ssh={env_:.2f} status_warm_over_cm={status_warm:.2f} "
        f"env_warm_over_cm={env_warm:.2f}"
    )


def _start_box_server(cfg: str, alias: str, run: Path) -> tuple[int, int]:
    """(port, PID) of an HTTP server the box user starts and leaves running, answering /health."""
    from tests.ports import free_port

    port = free_port()
    script = (
        f"d=$(mktemp -d) && echo ok > $d/health && cd $d && "
        f"BENCH_CLI=1 nohup python3 -m http.server {port} --bind 127.0.0.1 >/dev/null 2>&1 </dev/null & "
        "echo $!"
    )
    r = subprocess.run(["ssh", "-F", cfg, alias, script], capture_output=True, text=True, timeout=30)
    if r.returncode != 0 or not r.stdout.strip().isdigit():
        raise SystemExit(f"could not start the box's HTTP server: {r.stderr[-500:]}")
    pid = int(r.stdout.strip())
    deadline = time.monotonic() + 30
    health = ["ssh", "-F", cfg, alias, "curl", "-sf", f"http://127.0.0.1:{port}/health"]
    while subprocess.run(health, capture_output=True).returncode != 0:
        if time.monotonic() > deadline:
            raise SystemExit("the box's HTTP server never answered /health")
        time.sleep(0.2)
    return port, pid


def _wait_for_agent(sd: list[str], env: dict[str, str], host: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        r = subprocess.run([*sd, "agent", "status", "--json"], env=env, capture_output=True, text=True)
        if any(h.get("state") == "connected" for h in json.loads(r.stdout or "{}").get("hosts", [])):
            return
        time.sleep(0.2)
    raise SystemExit("the agent never kept the box")


def _kill_agent(run: Path) -> None:
    for pid_file in (run / "specdebug").glob("*.pid"):
        text = pid_file.read_text().strip()
        if text:
            try:
                os.kill(int(text), signal.SIGKILL)
            except ProcessLookupError:
                pass


if __name__ == "__main__":
    main()
