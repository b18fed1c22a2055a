"""The README's two-node loopback recipe ("Two nodes on one machine"), read from the README and run as
written (issue 41: a 2-node deployment on loopback hosts from the README alone did not come up).

A throwaway box user with Debian's bash set-up runs `sim install-box --user`; the real sshd answers
at 127.0.0.2 and 127.0.0.3; the README's ssh config block gets the login details a user's own config
has (port, user, key, known hosts), its profile block is written as it stands but for its three port
numbers (free ones of this run: two runs on one machine must not meet), and every `specdebug ...`
line of its command block runs with that config.  The deployment must come up as one, with each
node's ranks on the README's half of the simulated GPUs, be measured and stopped.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from pathlib import Path

import pytest

from tests.cluster_harness import kill_recorded
from tests.integration.test_sim_install_box import (
    CHECKOUT,
    DEBIAN_BASHRC,
    SYSTEM_PYTHON,
    _as_user,
    plain_sshd,
)
from tests.pair_harness import _users_db
from tests.readme_commands import README
from tests.security.boxusers import box_users, cli, skip_reason
from tests.sshd_harness import free_port

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(1200),  # the install-box venv, as in test_sim_install_box
    pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason())),
    pytest.mark.skipif(not Path(SYSTEM_PYTHON).exists(), reason="no system python3"),
]
HEADING = "### Two nodes on one machine (loopback)"


def recipe() -> tuple[str, str, list[str]]:
    """The section's ssh config block, profile block and `specdebug` command lines."""
    text = README.read_text(encoding="utf-8")
    assert HEADING in text, f"README.md has no {HEADING!r} section"
    section = re.split(r"\n##+ ", text.split(HEADING, 1)[1], maxsplit=1)[0]
    blocks = dict(re.findall(r"```(\w+)\n(.*?)```", section, re.S))
    commands = [
        line.strip().split("#", 1)[0].strip()
        for line in section.splitlines()
        if line.startswith("    specdebug ")
    ]
    assert set(blocks) >= {"sshconfig", "toml"} and commands, section
    return blocks["sshconfig"], blocks["toml"], commands


def login_config(block: str, sshd, user, path: Path) -> Path:
    """The README's Host blocks with what the user's own config would add to log in."""
    lines = []
    for line in block.splitlines():
        lines.append(line)
        if line.startswith("Host "):
            lines += [
                f"    Port {sshd.port}",
                f"    User {user.name}",
                f"    IdentityFile {sshd.client_key}",
                "    IdentitiesOnly yes",
                f"    UserKnownHostsFile {sshd.known_hosts}",
            ]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_readmes_two_node_recipe_comes_up_as_one(tmp_path: Path) -> None:
    ssh_block, toml_block, commands = recipe()
    ports = re.findall(r"\b31\d\d\d\b", toml_block)
    assert ports, toml_block
    profile_text = toml_block
    for port in sorted(set(ports)):
        profile_text = re.sub(rf"\b{port}\b", str(free_port()), profile_text)
    name = re.search(r'^name = "([^"]+)"', profile_text, re.M)
    assert name is not None
    with plain_sshd(listen=("127.0.0.1", "127.0.0.2", "127.0.0.3")) as sshd, box_users(sshd, 1) as (user,):
        _users_db(["usermod", "-s", "/bin/bash", user.name]).check_returncode()
        bashrc = user.home / ".bashrc"
        bashrc.write_text(DEBIAN_BASHRC)
        os.chown(bashrc, user.uid, user.gid)
        r = _as_user(
            user, f"cd {CHECKOUT} && HOME={user.home} {SYSTEM_PYTHON} -m specdebug.cli sim install-box --user"
        )
        assert "sim box ready" in r.stdout, r.stdout + r.stderr
        user.config = login_config(ssh_block, sshd, user, tmp_path / "ssh_config")
        work = tmp_path / "work"
        work.mkdir()
        profile = work / "loopback-2node.toml"
        profile.write_text(profile_text)
        states = user.home / ".specdebug" / "servers"
        try:
            said = {}
            for line in commands:
                argv = line.split()
                assert argv[0] == "specdebug", line
                argv = [str(profile) if a == "loopback-2node.toml" else a for a in argv[1:]]
                r = cli(user, *argv, timeout=300)
                said[argv[0]] = r
                assert r.returncode == 0, (line, r.stdout, r.stderr)
                if argv[0] == "status":  # both nodes run: each on its half of the one simulated box
                    gpus = json.loads(cli(user, "probe", "node0", "--json").stdout)["gpus"]
                    used = [g["memory_used_mib"] for g in gpus]
                    assert len(used) == 8 and all(m > 1000 for m in used), used
            assert "ready as one" in said["launch"].stdout and "on 2 nodes" in said["launch"].stdout
            assert "node 1 node1: running" in said["status"].stdout, said["status"].stdout
            assert "stopped process group" in said["stop"].stdout
            assert "tok/s" in said["bench"].stdout, said["bench"].stdout
        finally:
            kill_recorded(states, name.group(1)) if states.is_dir() else None


def test_the_recipe_is_in_the_readme() -> None:
    """The section parses without a box: a README edit that breaks the recipe's shape fails at once."""
    ssh_block, toml_block, commands = recipe()
    assert "HostName 127.0.0.2" in ssh_block and "HostName 127.0.0.3" in ssh_block
    doc = tomllib.loads(toml_block)
    assert doc["deployment"]["nodes"] == ["node0", "node1"]
    assert {c.split()[1] for c in commands} == {"launch", "status", "bench", "stop"}
    node_args = doc["deployment"]["node_args"]
    assert node_args["node0"] == ["--host", "127.0.0.2"]  # each node's own address: health asks there
    assert node_args["node1"][:2] == ["--host", "127.0.0.3"] and node_args["node1"].count("--port") == 1
