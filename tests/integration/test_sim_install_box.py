"""`specdebug sim install-box`: a second user makes this machine their simulated GPU box, behind the
real sshd, with nothing but that command (issue 41).

Before it, a sim box behind a real sshd took what only sim/box/loopback_sshd.py knew: a Python with
specdebug (Debian refuses system pip), the fake `nvidia-smi` first on PATH, $SPECDEBUG_SIM_GPU_DIR,
all placed where a non-interactive `ssh box CMD` sees them.  Here a throwaway user with bash as
login shell (whose Debian ~/.bashrc returns early when not interactive) runs install-box, and
specdebug, logging in as that user, probes 8 simulated GPUs and launches an example sim profile
whose load then shows on them; `--remove` takes it all out again.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from specdebug.resources import data_dir
from tests.leakcheck import TAG_VAR
from tests.pair_harness import _users_db
from tests.security.boxusers import box_users, cli, skip_reason
from tests.sshd_harness import free_port, start_sshd

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(1200),  # a venv and pip install of specdebug with its dependencies, as the user
    pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason())),
    pytest.mark.skipif(shutil.which("python3", path="/usr/bin") is None, reason="no system python3"),
]
CHECKOUT = Path(__file__).resolve().parents[2]
SYSTEM_PYTHON = "/usr/bin/python3"
INSTALL_DEADLINE_S = 600

DEBIAN_BASHRC = (
    "# ~/.bashrc (Debian's skeleton)\ncase $- in\n    *i*) ;;\n      *) return;;\nesac\nalias ll='ls -l'\n"
)


@contextlib.contextmanager
def plain_sshd(listen: tuple[str, ...] = ("127.0.0.1",)) -> Iterator:
    """The real sshd as a box has it: sessions get sshd's own PATH and a first-level bash (which reads
    ~/.bashrc), not the harness's fixture PATH and SHLVL=1 (its first SetEnv wins); in a folder
    every box user can pass through (boxusers.users_sshd).  `listen`: its loopback addresses (the
    README's two-node recipe logs in at 127.0.0.2 and 127.0.0.3)."""
    root = Path(tempfile.mkdtemp(prefix="sdbox-sshd-", dir="/tmp"))
    os.chmod(root, 0o711)
    tag = f" {TAG_VAR}={os.environ[TAG_VAR]}" if os.environ.get(TAG_VAR) else ""
    server = start_sshd(root / "sshd", extra_config=(f"SetEnv SPECDEBUG_TEST_SSHD=1{tag}",), listen=listen)
    os.chmod(root / "sshd", 0o711)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def _as_user(user, script: str) -> subprocess.CompletedProcess:
    """BoxUser.sh with room for a venv and a pip install (minutes on a busy machine)."""
    return subprocess.run(
        ["runuser", "-u", user.name, "--", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=INSTALL_DEADLINE_S,
        cwd="/",
    )


def _example_on_port(tmp_path: Path, port: int) -> Path:
    """The baseline example (SGLang sim; the vLLM-mode sim writes no GPU load yet) on a port of this test's (what the install's report says to change)."""
    examples = data_dir("examples")
    assert examples is not None
    example = examples / "baseline.toml"
    import tomllib

    argv = tomllib.loads(example.read_text())["server"]["argv"]
    argv[argv.index("--port") + 1] = str(port)
    path = tmp_path / "baseline.toml"
    path.write_text(
        f'extends = "{example}"\nname = "sim-install-box"\n[server]\nargv = {json.dumps(argv)}\nport = {port}\n'
    )
    return path


def _taken_port_names_a_port_of_the_users_block(user, profile: Path) -> None:
    """Another user (root, this test) holds the profile's port: the box user's launch is refused before
    anything starts, naming whose the port is and a free port of the block install-box gave this user
    (issue 41: the examples' fixed ports collide for two users of one box)."""
    import re
    import socket
    import tomllib

    from specdebug.sim.box.install import user_ports

    port = tomllib.loads(profile.read_text())["server"]["port"]
    low, high = user_ports(user.uid)
    with socket.socket() as held:
        held.bind(("127.0.0.1", port))
        held.listen()
        r = cli(user, "launch", user.alias, "-c", str(profile), timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"port {port} is in use by another user's process: root (uid 0)" in r.stderr, r.stderr
    m = re.search(r"(\d+) is free on the box now \(this login's \$SPECDEBUG_SIM_PORTS block\)", r.stderr)
    assert m is not None and low <= int(m.group(1)) < high, r.stderr


def test_second_user_installs_a_sim_box_and_specdebug_launches_an_example_through_sshd(
    tmp_path: Path,
) -> None:
    with plain_sshd() as sshd, box_users(sshd, 1) as (user,):
        _users_db(["usermod", "-s", "/bin/bash", user.name]).check_returncode()
        bashrc_path = user.home / ".bashrc"
        bashrc_path.write_text(DEBIAN_BASHRC)
        os.chown(bashrc_path, user.uid, user.gid)
        # the box has only Debian's python3 and a checkout: install-box runs on the standard library
        install = f"cd {CHECKOUT} && HOME={user.home} {SYSTEM_PYTHON} -m specdebug.cli sim install-box --user"
        r = _as_user(user, install)
        assert "sim box ready" in r.stdout, r.stdout + r.stderr
        bashrc = bashrc_path.read_text()
        assert bashrc.index("specdebug sim box") < bashrc.index("return"), bashrc

        r = _as_user(user, install.replace("--user", "--user --from /nonexistent-source"))
        assert r.returncode == 1  # a failed reinstall leaves the working box (and one block) in place
        assert bashrc_path.read_text().count("# >>> specdebug sim box") == 1

        r = cli(user, "probe", user.alias, "--json")
        assert r.returncode == 0, r.stdout + r.stderr
        gpus = json.loads(r.stdout)["gpus"]
        assert [g["name"] for g in gpus] == ["NVIDIA H200"] * 8, gpus

        profile = _example_on_port(tmp_path, free_port())
        _taken_port_names_a_port_of_the_users_block(user, profile)
        try:
            r = cli(user, "launch", user.alias, "-c", str(profile), "--wait", timeout=300)
            assert r.returncode == 0, r.stdout + r.stderr
            assert "ready" in r.stdout, r.stdout
            r = cli(user, "probe", user.alias, "--json")
            used = [g["memory_used_mib"] for g in json.loads(r.stdout)["gpus"]]
            assert all(m > 1000 for m in used), f"the sim's load is not on the simulated GPUs: {used}"
        finally:
            cli(user, "stop", user.alias, "-c", str(profile))

        r = _as_user(user, install.replace("--user", "--remove"))
        assert r.returncode == 0, r.stderr
        assert bashrc_path.read_text() == DEBIAN_BASHRC
        assert not (user.home / ".specdebug" / "simbox").exists()
