"""Profiles that run the simulated box from this checkout, for tests and perf scripts."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from specdebug.core.profiles import Profile
from tests.sshd_harness import free_port


def sim_profile(
    workdir: Path,
    name: str,
    *extra: str,
    port: int | None = None,
    time_scale: str = "0.02",
    timeout_s: float = 60,
    env: dict | None = None,
) -> Profile:
    """A tp-2 sim on a free port; its own --log-file gives the sidecar with its ready/failed times."""
    server: dict = {
        "argv": [
            sys.executable,
            "-m",
            "specdebug.sim",
            "--tp",
            "2",
            "--port",
            str(port or free_port()),
            "--time-scale",
            time_scale,
            "--log-file",
            str(workdir / f"{name}.sim.log"),
            *extra,
        ],
        "log_file": str(workdir / f"{name}.log"),
        "kind": "sglang",
    }
    if env is not None:
        server["env"] = env
    return Profile.model_validate({"name": name, "server": server, "ready": {"timeout_s": timeout_s}})


def sim_record(profile: Profile) -> dict:
    """The sim's own sidecar record (<log-file>.sim.json)."""
    argv = profile.server.argv
    return json.loads(Path(argv[argv.index("--log-file") + 1] + ".sim.json").read_text())
