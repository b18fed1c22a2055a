"""A box whose python3 hangs at start: the helper is tried again, and the warning says why it failed."""

from __future__ import annotations

import pytest

from specdebug.remote import helperstart
from tests.boxes import ssh_box
from tests.sshd_harness import SSHD, start_sshd

pytestmark = pytest.mark.skipif(SSHD is None, reason="OpenSSH sshd not installed")


async def test_a_helper_that_never_greets_is_retried_and_its_failure_named(tmp_path, monkeypatch, sshd):
    slow = tmp_path / "slowbin"
    slow.mkdir()
    (slow / "python3").write_text("#!/bin/sh\nexec cat >/dev/null\n")  # never greets; ends at EOF
    (slow / "python3").chmod(0o755)
    # PATH set after the login shell's own start-up files (a ~/.bashrc may put another python3 first)
    login = tmp_path / "login.sh"
    login.write_text(f'#!/bin/sh\nPATH={slow}:$PATH; export PATH\nexec /bin/sh -c "$SSH_ORIGINAL_COMMAND"\n')
    login.chmod(0o755)
    server = start_sshd(tmp_path / "sshd", extra_config=(f"ForceCommand {login}",))
    monkeypatch.setattr(helperstart, "HELPER_START_S", 1.0)
    remote = ssh_box(server.alias, ssh_config=server.config_path, connect_timeout=10.0)
    try:
        await remote.start()
        await remote.wait_connected(20)
        warning = next(w for w in remote.warnings if "helper" in w)
        assert "did not answer within 1 s" in warning and "(2 of 2 tries)" in warning, warning
    finally:
        await remote.close()
        server.stop()
