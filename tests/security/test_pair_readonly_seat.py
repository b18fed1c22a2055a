"""A read-only tmux seat affects nothing but its own view, whatever tmux command it runs.

tmux lets a read-only client run the commands it marks harmless, and several of those take a
target client or act on every client: before, the seat's `detach-client -s/-a` detached the
driver again and again, `detach-client -P` sent SIGHUP to the driver's shell, `attach -c` changed
the session's directory, `attach -d/-x` detached or hung up the others, `switch-client -c` moved
the driver, and its small terminal shrank the driver's window.  Now a read-only seat watches
through a view of its own (core/pair/view.py).  Here the seat (a real user, in a real small
terminal) runs every tmux command that takes a target client, aimed at the driver, at the session
and at all clients, through the session's socket and through its own view; the driver's terminal,
shell, window size, directory and mode stay as they were.  Real tmux, the app against the sshd.
"""

from __future__ import annotations

import json
import secrets
import shlex
import time

import pytest

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


def screen(sock: str, name: str) -> str:
    return tmux(sock, "capture-pane", "-p", "-t", f"={name}:").stdout


def attacks(name: str, driver_tty: str) -> list[list[str]]:
    """Every tmux command that takes a target client (or acts on all clients), aimed at the driver."""
    d, s = driver_tty, f"={name}"
    return [
        ["detach-client", "-a"],
        ["detach-client", "-s", s],
        ["detach-client", "-t", d],
        ["detach-client", "-P", "-t", d],
        ["detach-client", "-P", "-s", s],
        ["switch-client", "-c", d, "-t", s],
        ["switch-client", "-c", d, "-r"],  # would toggle the driver to read-only
        ["switch-client", "-c", d, "-n"],
        ["switch-client", "-c", d, "-l"],
        ["refresh-client", "-t", d, "-C", "20x10"],
        ["refresh-client", "-t", d, "-f", "read-only"],
        ["refresh-client", "-t", d, "-S"],
        ["display-message", "-c", d, "hello"],
        ["display-popup", "-c", d, "-E", "true"],
        ["display-menu", "-c", d, "-x", "0", "-y", "0", "x", "x", "detach-client"],
        ["display-panes", "-t", d],
        ["command-prompt", "-t", d, "detach-client"],
        ["confirm-before", "-t", d, "detach-client"],
        ["lock-client", "-t", d],
        ["suspend-client", "-t", d],
        ["show-messages", "-t", d],
        ["choose-client", "-t", s],
        ["list-clients", "-t", s],  # reads only: allowed, harmless
    ]


# attach-session needs a terminal: the seat runs these in one of its own
ATTACH = [["-c", "/"], ["-d"], ["-x"], ["-r"], ["-f", "!read-only"]]


def test_readonly_seat_reaches_nothing_but_its_own_view(sshd) -> None:
    with unix_users(1) as (viewer,), shared_root() as root:
        name = f"v{secrets.token_hex(3)}"
        res = pair_cli(
            root, "-F", str(sshd.config_path), "gpubox",
            "--name", name, "--detach", "--json", "--allow-ro", viewer,
        )  # fmt: skip
        assert res.returncode == 0, res.stderr
        info = json.loads(res.stdout)
        sock = info["socket"]
        (seat_info,) = info["seats"]
        view_join = shlex.split(seat_info["join"])
        view_sock = view_join[view_join.index("-S") + 1]
        terms: list[Terminal] = []
        try:
            # the driver's client runs under a shell of its own: the shell SIGHUP would reach
            driver = Terminal(
                ["sh", "-c", f"tmux -S {shlex.quote(sock)} attach -t ={name}; sleep 600"], size=(150, 45)
            )
            terms.append(driver)
            wait_for(lambda: "gpubox" in (s := screen(sock, name)) and "pairing" in s, 90, what="app up")
            seat = Terminal(view_join, user=viewer, size=(60, 15))  # a small terminal
            terms.append(seat)
            wait_for(lambda: f"{viewer} ro ● attached" in screen(sock, name), 30, what="the seat shown")

            def driver_client() -> str:
                rows = tmux(
                    sock, "list-clients", "-F", "#{client_pid}\t#{client_tty}\t#{client_flags}"
                ).stdout
                mine = [r.split("\t") for r in rows.splitlines() if "ignore-size" not in r]
                return mine[0][1] if len(mine) == 1 else ""

            tty = wait_for(driver_client, 10, what="the driver's client")
            before = {
                "size": tmux(
                    sock, "display-message", "-p", "-t", f"={name}:", "#{window_width}x#{window_height}"
                ).stdout,
                "path": tmux(sock, "display-message", "-p", "-t", f"={name}:", "#{session_path}").stdout,
                "pane": tmux(sock, "display-message", "-p", "-t", f"={name}:", "#{pane_pid}").stdout,
            }
            assert before["size"].strip() == "150x45", before  # the small seat did not shrink the driver

            for target, session in (
                (sock, name),
                (view_sock, "view"),
            ):  # the session's socket, the seat's view
                for cmd in attacks(session, tty):
                    tmux(target, *cmd, user=viewer)
                for flags in ATTACH:
                    t = Terminal(
                        ["tmux", "-S", target, "attach-session", *flags, "-t", f"={session}"],
                        user=viewer,
                        size=(40, 10),
                    )
                    terms.append(t)
                    t.wait_exit(3)
                time.sleep(0.5)
                assert driver_client() == tty, f"the driver's client was detached via {target}"
                flags = tmux(sock, "list-clients", "-F", "#{client_tty} #{client_flags}").stdout
                assert (
                    f"{tty} attached" in flags and "read-only" not in flags.split(tty, 1)[1].split("\n")[0]
                ), flags
                assert driver.proc.poll() is None, "the driver's shell was hung up"
                after = tmux(
                    sock, "display-message", "-p", "-t", f"={name}:", "#{window_width}x#{window_height}"
                ).stdout
                assert after == before["size"]
                assert (
                    tmux(sock, "display-message", "-p", "-t", f"={name}:", "#{session_path}").stdout
                    == before["path"]
                )
                assert pid_alive(int(before["pane"]))

            # and the driver's keys still work: it is the same session, fully usable
            driver.type("?")
            wait_for(lambda: "specdebug keys" in screen(sock, name), 15, what="help from the driver's key")
            driver.type("\x1b")
            assert view_sock != sock  # the seat joined its own view, not the session's server
        finally:
            for term in terms:
                term.close()
            tmux(view_sock, "kill-server")
            tmux(sock, "kill-server")
