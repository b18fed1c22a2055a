"""Bisection leaves alone what it did not launch, over the real sshd on the sim:

* a server of the session launched by hand (the good profile itself) holds the GPUs: `bisect`
  refuses to start, names it (pid, port), and the server is still running afterwards;
* once it is stopped, the same bisection runs; its candidates' names say which bisection launched
  them (`<good>.bx-<bisection>-<fingerprint>`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from specdebug.core.bisect.models import LAUNCH_EVENT
from specdebug.core.journal import Journal
from tests import clifork
from tests.bisectprofiles import CULPRIT, HARMLESS_FLAGS, forget_records, write_pair

TAG = "bxtrust-"


def cli(sshd, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "specdebug.cli", args[0], "-F", str(sshd.config_path), "gpubox", *args[1:]]
    return clifork.run(cmd, capture_output=True, text=True, timeout=timeout)


def test_a_hand_launched_server_is_never_stopped_and_blocks_the_bisection(sshd, tmp_path: Path) -> None:
    good, bad = write_pair(tmp_path / "p", bad_flags=[HARMLESS_FLAGS[0], CULPRIT], tag=TAG)
    session = tmp_path / "session"
    s = ("--session", str(session))
    try:
        launched = cli(sshd, "launch", "-c", str(good), *s, "--wait", "--json")
        assert launched.returncode == 0, launched.stderr[-2000:]
        pid = json.loads(launched.stdout)["pid"]
        refused = cli(sshd, "bisect", "--good", str(good), "--bad", str(bad), *s, "--json")
        assert refused.returncode == 1
        assert f"{TAG}good (pid {pid}" in refused.stderr and "holds the GPUs" in refused.stderr
        status = cli(sshd, "status", "-c", str(good), "--json", timeout=60)
        assert json.loads(status.stdout)["state"] == "running", status.stdout  # not stopped behind our back
        assert cli(sshd, "stop", "-c", str(good), *s, timeout=60).returncode == 0
        run = cli(
            sshd, "bisect", "--good", str(good), "--bad", str(bad), *s, "--metric", "gen_throughput", "--json"
        )
        assert run.returncode == 0, run.stderr[-3000:]
        result = json.loads(run.stdout)
        assert result["verdict"] == "found" and result["culprits"] == CULPRIT and result["confirmed"]
        names = {e["profile"] for e in Journal(session).events({LAUNCH_EVENT})}
        candidates = {n for n in names if n.startswith(f"{TAG}good.bx-")}
        assert candidates and all(n.split(".bx-")[1].startswith(result["bisect"][:6]) for n in candidates)
    finally:
        forget_records(sshd, [f"{TAG}good", f"{TAG}bad"], [session])
