"""`specdebug pair` with real tmux, real Unix users and real terminals, against the real sshd.

One session, every claim of the issue in order: the read-only seat attaches and sees the app, its
keys and tmux commands are refused by tmux, the TUI shows the seat within 2 s; a user not granted
is refused (by the folder, and by tmux's list even when the folder is opened); the driver's keys
work; granting write from the palette lets the seat's keys through; `q` by the driver ends the
session and leaves no process and no folder.
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shlex
import sys
import time
from pathlib import Path

import pytest

from specdebug.core.pair import acl as pair_acl
from tests import clifork
from tests.pair_harness import (
    Terminal,
    can_make_users,
    pair_cli,
    pid_alive,
    shared_root,
    tmux,
    unix_users,
    wait_for,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(can_make_users() is not None, reason=str(can_make_users())),
]


def start_pair(sshd, root: Path, name: str, *extra: str) -> dict:
    res = pair_cli(root, "-F", str(sshd.config_path), "gpubox", "--name", name, "--detach", "--json", *extra)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def screen(sock: str, name: str) -> str:
    return tmux(sock, "capture-pane", "-p", "-t", f"={name}:").stdout


def test_pair_seats_enforced_by_tmux_and_shown_live(sshd) -> None:
    with unix_users(3) as (viewer, _unused, outsider), shared_root() as root:
        name = f"t{secrets.token_hex(3)}"
        info = start_pair(sshd, root, name, "--allow-ro", viewer)
        sock, folder = info["socket"], Path(info["folder"])
        terms: list[Terminal] = []
        try:
            assert info["session"] == name
            st = folder.stat()
            assert st.st_uid == os.getuid()
            if info["access"] == "acl":  # folder 0700 + the viewer's entry; the socket not open to others
                assert st.st_mode & 0o007 == 0 and Path(sock).stat().st_mode & 0o007 == 0
                assert set(pair_acl.named_users(folder)) == {pwd.getpwnam(viewer).pw_uid}
            else:  # a filesystem without ACLs: reachable, not listable; tmux's list is the gate
                assert info["access"] == "tmux-only" and st.st_mode & 0o777 == 0o711
            # a read-only seat joins a view of its own (core/pair/view.py), never the session's server
            view = str(folder / f"v.{pwd.getpwnam(viewer).pw_uid}.sock")
            view_join = f"tmux -S {view} attach-session -t =view"
            assert info["seats"] == [{"user": viewer, "mode": "ro", "attached": 0, "join": view_join}]
            server_pid = int(tmux(sock, "display-message", "-p", "#{pid}").stdout)
            pane_pid = int(tmux(sock, "display-message", "-p", "-t", f"={name}:", "#{pane_pid}").stdout)
            driver = Terminal(["tmux", "-S", sock, "attach-session", "-t", f"={name}:"], size=(150, 45))
            terms.append(driver)
            wait_for(lambda: "gpubox" in (s := screen(sock, name)) and "pairing" in s, 90, what="app up")

            # the read-only seat attaches with the exact join command and sees the app
            seat = Terminal(shlex.split(view_join), user=viewer, size=(120, 40))
            terms.append(seat)
            listed = f"{viewer}\t1"
            wait_for(
                lambda: (
                    listed in tmux(view, "list-clients", "-F", "#{client_user}\t#{client_readonly}").stdout
                ),
                20,
                0.02,
            )
            t_listed = time.monotonic()
            toasted = []  # the toast lasts 6 s: look for it on every screen read, not after the waits

            def seat_shown() -> bool:
                text = screen(sock, name)
                toasted.append("joined (read-only)" in text)
                return f"{viewer} ro ● attached" in text

            # shown without a key pressed (the bar polls tmux once a second); the delay is printed, not
            # asserted: a loaded machine stretches it
            wait_for(seat_shown, 20, 0.05, "seat shown")
            print(f"seat shown {time.monotonic() - t_listed:.2f} s after tmux listed the client")
            if not any(toasted):
                wait_for(lambda: "joined (read-only)" in screen(sock, name), 5, what="the toast")
            wait_for(lambda: "gpubox" in seat.text(), 20, what="the viewer sees the app")
            # a read-only seat's terminal does not resize the driver's window (its view is its own)
            size = tmux(sock, "display-message", "-p", "-t", f"={name}:", "#{window_width}x#{window_height}")
            assert size.stdout.strip() == "150x45"

            # the viewer's keys and tmux commands are refused by tmux
            seat.type("?")
            time.sleep(1.5)
            assert "specdebug keys" not in screen(sock, name)
            for cmd in (
                ["send-keys", "-t", f"={name}:", "q"],
                ["kill-server"],
                ["server-access", "-w", viewer],
            ):
                res = tmux(view, *cmd, user=viewer)
                assert "client is read-only" in res.stderr, (cmd, res.stderr)
                res = tmux(sock, *cmd, user=viewer)  # the session's own server does not let it in at all
                assert res.returncode != 0 and (
                    "Permission denied" in res.stderr or "access not allowed" in res.stderr
                )
            assert pid_alive(server_pid) and pid_alive(pane_pid)

            # a user not granted is refused: by the folder, and by tmux's list even when it is opened
            out = Terminal(shlex.split(info["join"]), user=outsider, size=(100, 30))
            terms.append(out)
            assert out.wait_exit(15) is not None
            assert "Permission denied" in out.text() or "access not allowed" in out.text(), out.text()
            os.chmod(folder, 0o711)
            os.chmod(sock, 0o777)
            out2 = Terminal(shlex.split(info["join"]), user=outsider, size=(100, 30))
            terms.append(out2)
            assert out2.wait_exit(15) is not None
            assert "access not allowed" in out2.text(), out2.text()
            assert outsider not in tmux(sock, "list-clients", "-F", "#{client_user}").stdout

            # the driver's keys work
            driver.type("?")
            wait_for(lambda: "specdebug keys" in screen(sock, name), 15, what="help from the driver's key")
            driver.type("\x1b")
            wait_for(lambda: "specdebug keys" not in screen(sock, name), 15, what="help closed")

            # the driver grants write from the palette; then the seat's keys go through
            driver.type("\x10")  # ctrl+p; type only once the palette is up (else the keys reach the app)
            wait_for(lambda: "Search for commands" in screen(sock, name), 15, what="the palette")
            driver.type("grant write")
            wait_for(lambda: f"grant write to {viewer}" in screen(sock, name), 15, what="palette entry")
            driver.type("\r")
            wait_for(lambda: f"{viewer} rw ● attached" in screen(sock, name), 15, what="seat now rw")
            seat.type("?")
            wait_for(lambda: "specdebug keys" in screen(sock, name), 15, what="help from the seat's key")
            seat.type("\x1b")
            wait_for(lambda: "specdebug keys" not in screen(sock, name), 15, what="help closed")
            # seat commands are the driver's: the guest's palette try is refused, the seat stays
            time.sleep(1.1)  # tmux keeps activity in whole seconds
            seat.type("\x10")
            wait_for(lambda: "Search for commands" in screen(sock, name), 15, what="the palette")
            seat.type(f"revoke {viewer}")
            wait_for(lambda: f"Seat: revoke {viewer}" in screen(sock, name), 15, what="palette entry")
            seat.type("\r")
            wait_for(lambda: "only the driver" in screen(sock, name), 15, what="refusal toast")
            assert f"{viewer} rw ● attached" in screen(sock, name)

            # q by the driver ends the session: no client, no server, no app, no folder
            driver.type("q")
            assert driver.wait_exit(30) is not None
            assert seat.wait_exit(30) is not None
            wait_for(lambda: not pid_alive(server_pid) and not pid_alive(pane_pid), 30, what="processes gone")
            wait_for(lambda: not folder.exists(), 10, what="folder removed")
        finally:
            for term in terms:
                term.close()
            tmux(sock, "kill-server")


def test_pair_attaches_its_creator_lists_and_q_leaves_nothing(sshd) -> None:
    """Without --detach the creator is attached at once; --list and --join --json describe the
    session; `q` ends it, and the `pair` command returns 0 with no process and no folder left."""
    with unix_users(1) as (viewer,), shared_root() as root:
        name = f"c{secrets.token_hex(3)}"
        env = {**os.environ, "SPECDEBUG_PAIR_DIR": str(root)}
        argv = [sys.executable, "-m", "specdebug.cli", "pair", "-F", str(sshd.config_path), "gpubox"]
        creator = Terminal([*argv, "--name", name, "--allow-ro", viewer], size=(140, 40), env=env)
        folder = root / f"specdebug-pair.{os.getuid()}.{name}"
        sock = str(folder / "tmux.sock")
        try:
            wait_for(
                lambda: "gpubox" in screen(sock, name) and "pairing" in screen(sock, name), 90, what="app up"
            )
            assert f"{viewer} ro ○ away" in screen(sock, name)
            server_pid = int(tmux(sock, "display-message", "-p", "#{pid}").stdout)

            def cli(*args: str) -> dict:
                res = clifork.run(
                    [sys.executable, "-m", "specdebug.cli", "pair", *args],
                    env=env,
                    capture_output=True,
                    text=True,
                )
                assert res.returncode == 0, res.stderr
                return json.loads(res.stdout)

            listed = cli("--list", "--json")["sessions"]
            assert [
                (s["name"], s["socket"], s["seats"][0]["user"], s["seats"][0]["mode"]) for s in listed
            ] == [(name, sock, viewer, "ro")]
            joined = cli("--join", name, "--json", "--readonly")
            assert joined["join"] == f"tmux -S {sock} attach-session -t ={name} -f read-only"

            creator.type("q")
            assert creator.wait_exit(30) == 0, creator.text()[-500:]
            wait_for(lambda: not pid_alive(server_pid), 30, what="tmux server gone")
            assert not folder.exists()
        finally:
            creator.close()
            tmux(sock, "kill-server")
