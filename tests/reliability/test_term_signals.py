"""SIGTERM to a verb that started servers (issue 40).

`bisect`: TERM used to end the process at once and leave the trial's server running, unsaid; now
it is stopped by the trial's own cleanup, and the exit (143) says how to resume.  `launch --wait`:
TERM ends the watch, not the server: the line names what keeps running and how to stop it.
Over the real loopback sshd with the sim (bisect) and a server that never gets ready (launch).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from specdebug.core.journal import Journal
from tests.bisectprofiles import CULPRIT, forget_records, write_pair
from tests.security.boxkit import forget_server, run, unique, write_profile
from tests.sshd_harness import free_port


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def wait_for(what: str, check, timeout: float):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"no {what} within {timeout:g} s")


def test_term_to_bisect_stops_its_trial_server(sshd, tmp_path: Path) -> None:
    tag = f"t{os.getpid()}{int(time.time()) % 10000}"
    good, bad = write_pair(tmp_path / "p", bad_flags=[CULPRIT], tag=tag)
    session = tmp_path / "session"
    cmd = [sys.executable, "-m", "specdebug.cli", "bisect", "-F", str(sshd.config_path), "gpubox"]
    cmd += ["--good", str(good), "--bad", str(bad), "--session", str(session), "--json"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:

        def launched():
            if not (session / "events.jsonl").exists():
                return None
            got = Journal(session).events({"bisect_launch"})
            return got[0]["pid"] if got else None

        pid = wait_for("trial launch", launched, 120)
        assert alive(pid)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=90)
        took = time.monotonic() - t0
        text = err.decode()
        print(f"bisect after TERM: exit {proc.returncode} in {took:.1f} s; server {pid} alive: {alive(pid)}")
        assert proc.returncode == 143, text
        assert "bisect: TERM: stopping the trial's server before exiting" in text, text
        assert "--resume --session" in text, text
        wait_for("the trial's server gone", lambda: not alive(pid), 60)
        assert "Traceback" not in text, text
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        forget_records(sshd, [f"{tag}good", f"{tag}bad"], [session])


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["TERM", "INT"])
def test_term_to_launch_wait_names_what_keeps_running(sshd, tmp_path: Path, sig: int, code: int) -> None:
    """TERM (a scheduler, `kill`) and INT (Ctrl+C) alike: the old launch --wait said nothing."""
    name = unique("termwait")
    port = free_port()
    profile = write_profile(
        tmp_path / "p.toml",
        name,
        {"argv": ["sh", "-c", "exec sleep 300", name], "log_file": str(tmp_path / "s.log"), "port": port,
         "kind": "custom"},
        ready={"health": "/", "require_ready_line": False, "timeout_s": 120},
    )  # fmt: skip
    cmd = [sys.executable, "-m", "specdebug.cli", "launch", "-F", str(sshd.config_path), "gpubox"]
    cmd += ["-c", str(profile), "--wait"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        wait_for(
            "the launch record",
            lambda: (Path(os.environ["SPECDEBUG_STATE_DIR"]) / f"{name}.json").exists(),
            60,
        )
        record = json.loads((Path(os.environ["SPECDEBUG_STATE_DIR"]) / f"{name}.json").read_text())
        # the watch has begun once the launch is announced (TERM's handler is in place before that
        # line; the record is written before it): waited for, not slept for
        said: list[bytes] = []

        def read_stdout() -> None:
            for line in iter(proc.stdout.readline, b""):
                said.append(line)

        reader = threading.Thread(target=read_stdout, daemon=True)
        reader.start()
        wait_for("the launch announced", lambda: any(b"launched " in line for line in said), 60)
        t0 = time.monotonic()
        proc.send_signal(sig)
        proc.wait(60)
        reader.join(60)
        text = proc.stderr.read().decode()
        print(
            f"launch --wait after {sig!r}: exit {proc.returncode} in {time.monotonic() - t0:.2f} s: {text.strip()}"
        )
        assert proc.returncode == code, text
        assert f"{name} keeps running on gpubox (PID {record['pid']}" in text, text
        assert f"stop it with: specdebug stop -F {sshd.config_path} gpubox -c {profile}" in text, text
        assert alive(record["pid"])  # TERM ends the watch, not the server
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if run(sshd, "stop", "gpubox", "-c", str(profile), "--grace", "2", timeout=60).returncode != 0:
            forget_server(name)
