"""`launch --wait` reports the server's startup time, not specdebug's own side work.

The drift snapshot (core.drift) is taken under the server's interpreter.  Here that interpreter is a
wrapper of the test's own that answers the snapshot only after SLOW_DRIFT_S (as a venv with slow
files to hash would); the server itself (python -m http.server) is up in about a second.  The old
launch took the snapshot in front of the watch, so the verdict said "ready after 15.x s"; now the
watch runs beside it and the launch record (with the snapshot) still reaches the session journal.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from tests.security.boxkit import forget_server, run, unique, write_profile
from tests.sshd_harness import free_port

SLOW_DRIFT_S = 15


def test_verdict_time_is_the_servers_not_the_drift_snapshots(sshd, tmp_path: Path) -> None:
    wrapper = tmp_path / "python-slowdrift"
    wrapper.write_text(  # the drift module's source names its HashCache class: only it is slowed
        f'#!/bin/sh\ncase "$*" in *HashCache*) sleep {SLOW_DRIFT_S};; esac\nexec {sys.executable} "$@"\n'
    )
    wrapper.chmod(0o755)
    name = unique("beside")
    served = tmp_path / name  # the server's argv names the profile (boxkit.forget_server checks it)
    served.mkdir()
    port = free_port()
    argv = [str(wrapper), "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(served)]
    profile = write_profile(
        tmp_path / "p.toml",
        name,
        {"argv": argv, "log_file": str(tmp_path / "server.log"), "port": port, "kind": "custom"},
        ready={"health": "/", "require_ready_line": False, "timeout_s": 60},
    )
    session = tmp_path / "session"
    try:
        res = run(
            sshd, "launch", "gpubox", "-c", str(profile), "--wait", "--session", str(session), timeout=120
        )
        text = res.stdout.decode()
        assert res.returncode == 0, text + res.stderr.decode()
        got = re.search(r"ready after ([0-9.]+)s", text)
        assert got, text
        print(f"verdict: ready after {got.group(1)} s with a {SLOW_DRIFT_S} s drift snapshot beside it")
        assert float(got.group(1)) < SLOW_DRIFT_S - 5, f"the verdict counted the drift snapshot: {text}"
        kinds = [json.loads(line) for line in (session / "events.jsonl").read_text().splitlines()]
        launches = [r for r in kinds if r.get("kind") == "launch"]
        assert launches and isinstance(launches[0].get("drift"), dict), "no launch record with its drift"
        assert "error" not in launches[0]["drift"], launches[0]["drift"]
    finally:
        stop = run(sshd, "stop", "gpubox", "-c", str(profile), "--grace", "2", timeout=60)
        if stop.returncode != 0:
            forget_server(name)


def test_a_fifo_in_a_record_neither_holds_nor_times_the_verdict(sshd, tmp_path: Path) -> None:
    """The server's interpreter is a venv whose package RECORD names a FIFO: the old launch --wait
    waited 120 s in the drift snapshot and said "ready after 120.1s" for a server up in about 1 s."""
    from tests.security.test_hostile_drift import hostile_venv

    python, _site = hostile_venv(tmp_path)
    name = unique("fifolaunch")
    served = tmp_path / name  # the server's argv names the profile (boxkit.forget_server checks it)
    served.mkdir()
    port = free_port()
    argv = [str(python), "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(served)]
    profile = write_profile(
        tmp_path / "p.toml",
        name,
        {"argv": argv, "log_file": str(tmp_path / "server.log"), "port": port, "kind": "custom"},
        ready={"health": "/", "require_ready_line": False, "timeout_s": 200},
    )
    session = tmp_path / "session"
    try:
        res = run(
            sshd, "launch", "gpubox", "-c", str(profile), "--wait", "--session", str(session), timeout=240
        )
        text = res.stdout.decode()
        assert res.returncode == 0, text + res.stderr.decode()
        got = re.search(r"ready after ([0-9.]+)s", text)
        assert got, text
        print(f"verdict beside a FIFO in a RECORD: ready after {got.group(1)} s")
        assert float(got.group(1)) < 20, f"the verdict waited on the drift snapshot: {text}"
        records = [json.loads(line) for line in (session / "events.jsonl").read_text().splitlines()]
        drift = next(r for r in records if r.get("kind") == "launch")["drift"]
        assert any("FIFO" in s["why"] for s in drift.get("skipped") or []), drift
    finally:
        stop = run(sshd, "stop", "gpubox", "-c", str(profile), "--grace", "2", timeout=60)
        if stop.returncode != 0:
            forget_server(name)
