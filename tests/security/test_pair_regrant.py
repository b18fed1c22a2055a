"""A revoked seat can be granted again (palette and `pair --grant/--revoke USER`); the palette never
offers to change the driver's own seat.

Before, a revoke dropped the user from the seat list the palette reads, so nothing could give the
seat back short of a new session, and there was no headless twin.  Real users, real tmux, the app
against the real sshd, as in tests/integration/test_pair_tmux.py.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

import pytest

from specdebug.core.pair import view as pair_view
from specdebug.core.pair.owner import user_name
from specdebug.core.pair.seats import Mode
from tests.pair_harness import Terminal, can_make_users, pair_cli, shared_root, tmux, unix_users, wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(can_make_users() is not None, reason=str(can_make_users())),
]


def screen(sock: str, name: str) -> str:
    return tmux(sock, "capture-pane", "-p", "-t", f"={name}:").stdout


PALETTE = "\U0001f50e"  # the search line of Textual's command palette: open while it shows


def palette(sock: str, name: str, term: Terminal, query: str) -> None:
    """Open the command palette (ctrl+p, again if a key was lost) and type `query` once it is open."""
    for _ in range(5):
        term.type("\x10")
        try:
            wait_for(lambda: PALETTE in screen(sock, name), 5, what="the palette")
            break
        except AssertionError:
            continue
    else:
        raise AssertionError(f"the palette never opened: {screen(sock, name)}")
    term.type(query)


def access(sock: str) -> str:
    """Every seat and its mode, `user (R)`/`user (W)`: the session's own list and the read-only views."""
    modes = pair_view.seat_modes(sock, Path(sock).parent)
    return "\n".join(f"{u} ({'W' if m is Mode.RW else 'R'})" for u, m in modes.items())


def test_revoked_seat_is_granted_again_and_the_driver_is_never_offered(sshd) -> None:
    with unix_users(1) as (viewer,), shared_root() as root:
        name = f"g{secrets.token_hex(3)}"
        r = pair_cli(root, "-F", str(sshd.config_path), "gpubox", "--name", name, "--detach", "--json",
                     "--allow-ro", viewer)  # fmt: skip
        assert r.returncode == 0, r.stderr
        info = json.loads(r.stdout)
        sock = info["socket"]
        driver = None
        try:
            driver = Terminal(["tmux", "-S", sock, "attach-session", "-t", f"={name}:"], size=(150, 45))
            wait_for(lambda: "gpubox" in (s := screen(sock, name)) and "pairing" in s, 90, what="app up")

            # headless: revoke, then grant again (read-only, then write)
            r = pair_cli(root, "--revoke", viewer, "--name", name)
            assert r.returncode == 0 and "revoked" in r.stdout, r.stderr
            assert viewer not in access(sock)
            seats = json.loads((Path(info["folder"]) / "seats.json").read_text())
            assert seats["revoked"] == [viewer]

            # the palette offers the revoked seat again, and nothing about the driver's own seat
            palette(sock, name, driver, "Seat:")
            wait_for(
                lambda: f"grant read-only again to {viewer}" in screen(sock, name), 20, what="palette entry"
            )
            shown = [line for line in screen(sock, name).splitlines() if "Seat:" in line]
            me = user_name(os.getuid())
            assert not [line for line in shown if f" {me}" in line.split("Seat:", 1)[1]], shown
            driver.type("\x1b")
            for _ in range(5):  # Esc closes it (again, if the key was lost)
                try:
                    wait_for(lambda: PALETTE not in screen(sock, name), 5, what="palette closed")
                    break
                except AssertionError:
                    driver.type("\x1b")
            palette(sock, name, driver, "grant read-only again")
            wait_for(
                lambda: f"grant read-only again to {viewer}" in screen(sock, name), 20, what="palette entry"
            )
            driver.type("\r")
            wait_for(lambda: f"{viewer} (R)" in access(sock), 20, what="seat granted again from the palette")
            wait_for(lambda: f"{viewer} ro" in screen(sock, name), 20, what="seat shown again")

            r = pair_cli(root, "--revoke", viewer, "--name", name)
            assert r.returncode == 0 and viewer not in access(sock)
            r = pair_cli(root, "--grant", viewer, "--rw", "--name", name, "--json")
            assert r.returncode == 0, r.stderr
            assert json.loads(r.stdout)["seats"] == {viewer: "rw"} and f"{viewer} (W)" in access(sock)

            # the driver's own seat is not one to grant or revoke
            r = pair_cli(root, "--grant", me, "--name", name)
            assert r.returncode == 2 and "always has full access" in r.stderr and "Traceback" not in r.stderr
        finally:
            if driver is not None:
                driver.close()
            tmux(sock, "kill-server")
