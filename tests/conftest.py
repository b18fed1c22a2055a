"""Shared fixtures: a real OpenSSH sshd on loopback and a connected SSHRemote to it."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

from specdebug.remote.connection import SSHRemote
from tests.sshd_harness import SSHD, Sshd, start_sshd

# CI (SPECDEBUG_REQUIRE_SSHD set by .ci/run) runs the property tests on a fixed set of examples, so a
# landing is never decided by a new random draw; local runs keep exploring new examples each time.
settings.register_profile("ci", derandomize=True)
if os.environ.get("SPECDEBUG_REQUIRE_SSHD"):
    settings.load_profile("ci")


@pytest.fixture(scope="session", autouse=True)
def _own_data_dirs(tmp_path_factory):
    """Journals from verbs run without --session go to a test folder, not the user's data dir."""
    os.environ.setdefault("SPECDEBUG_SESSION", str(tmp_path_factory.mktemp("session")))
    yield


@pytest.fixture(autouse=True)
def box_state_dir(tmp_path_factory, monkeypatch):
    """This test's own folder for server records on the box (the box is this machine).

    Every SSHRemote and every CLI run the test starts reads SPECDEBUG_STATE_DIR, so no test writes
    records into the box user's real home, and parallel runs never see each other's servers."""
    path = tmp_path_factory.mktemp("box-state") / "servers"
    monkeypatch.setenv("SPECDEBUG_STATE_DIR", str(path))
    return path


@pytest.fixture(scope="session")
def sshd(tmp_path_factory) -> Sshd:
    if SSHD is None:  # .ci/run installs it (and forbids this skip); a laptop without it runs the rest
        if os.environ.get("SPECDEBUG_REQUIRE_SSHD"):
            pytest.fail("SPECDEBUG_REQUIRE_SSHD is set but OpenSSH sshd is not installed")
        pytest.skip("OpenSSH sshd not installed (apt-get install openssh-server): real-SSH tests skipped")
    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


@pytest.fixture
async def remote(sshd: Sshd):
    r = SSHRemote(sshd.alias, ssh_config=sshd.config_path, keepalive_interval=1.0, connect_timeout=5.0)
    await r.start()
    await r.wait_connected(15)
    yield r
    await r.close()
