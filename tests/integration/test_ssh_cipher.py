"""The SSH cipher a connection negotiates with a real sshd: AES-GCM first (issue 43: a followed log
is hundreds of packets a second, and asyncssh's ChaCha20-Poly1305 costs this client ~20 us of
Python per packet against ~3 us for AES-GCM); a config that names Ciphers keeps its choice."""

from __future__ import annotations

from pathlib import Path

from tests.boxes import ssh_box


async def negotiated(config: Path, alias: str) -> str:
    box = ssh_box(alias, ssh_config=str(config), connect_timeout=10.0, use_helper=False)
    await box.start()
    try:
        await box.wait_connected(20)
        conn = box.transport._conn  # the one asyncssh connection of this transport
        assert conn is not None
        return str(conn.get_extra_info("send_cipher"))
    finally:
        await box.close()


async def test_aes_gcm_is_preferred_and_a_configured_cipher_stands(sshd, tmp_path: Path) -> None:
    assert "gcm" in await negotiated(sshd.config_path, sshd.alias)
    own = sshd.write_client_config(
        tmp_path / "ssh_config", sshd.known_hosts, alias="chachabox", Ciphers="chacha20-poly1305@openssh.com"
    )
    assert "chacha20" in await negotiated(own, "chachabox")
