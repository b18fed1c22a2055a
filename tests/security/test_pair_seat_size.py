"""A read-only seat with a smaller terminal than the driver's is told so, and its view holds the whole screen.

Before: a read-only seat's view (core/pair/view.py, a tmux server of its own) took the seat's
terminal size, its inner client ignored its size, so a small seat saw the driver's screen cut to
its own size with no word of it.  Now the view's window is the driver's size (and follows it when
the driver resizes), and the view's status line tells a smaller seat the driver's size, its own,
and to enlarge it; a seat big enough is told it sees the driver's screen.  Real tmux, real users,
the app against the sshd; the driver's window never changes for a seat.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import shlex
import signal
import struct
import termios

import pytest

from tests.pair_harness import Terminal, can_make_users, pair_cli, shared_root, tmux, unix_users, wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(can_make_users() is not None, reason=str(can_make_users())),
]


def size_of(sock: str, target: str) -> str:
    return tmux(
        sock, "display-message", "-p", "-t", target, "#{window_width}x#{window_height}"
    ).stdout.strip()


def status_for(view: str, tty: str) -> str:
    """The view's status line as tmux expands it for the client on `tty` (the seat's terminal)."""
    return tmux(view, "display-message", "-p", "-c", tty, "#{E:status-left}").stdout


def seat_ttys(view: str) -> list[str]:
    return tmux(view, "list-clients", "-F", "#{client_tty}").stdout.split()


def resize(term: Terminal, cols: int, rows: int) -> None:
    """The terminal's new size, and the SIGWINCH a terminal sends (its pty is not the client's
    controlling terminal here, so the kernel sends none)."""
    fcntl.ioctl(term.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    os.kill(term.proc.pid, signal.SIGWINCH)


def test_small_readonly_seat_is_told_and_sees_the_whole_screen(sshd) -> None:
    with unix_users(1) as (viewer,), shared_root() as root:
        name = f"z{secrets.token_hex(3)}"
        res = pair_cli(
            root, "-F", str(sshd.config_path), "gpubox",
            "--name", name, "--detach", "--json", "--allow-ro", viewer,
        )  # fmt: skip
        assert res.returncode == 0, res.stderr
        info = json.loads(res.stdout)
        sock = info["socket"]
        view_join = shlex.split(info["seats"][0]["join"])
        view = view_join[view_join.index("-S") + 1]
        terms: list[Terminal] = []
        try:
            driver = Terminal(["tmux", "-S", sock, "attach", "-t", f"={name}"], size=(150, 45))
            terms.append(driver)
            wait_for(lambda: size_of(sock, f"={name}:") == "150x45", 30, what="the driver's size")
            seat = Terminal(view_join, user=viewer, size=(60, 15))  # a small terminal
            terms.append(seat)
            (tty,) = wait_for(lambda: seat_ttys(view), 30, what="the seat's client")

            # the view holds the driver's whole screen, whatever the seat's terminal
            wait_for(lambda: size_of(view, "=view:") == "150x45", 15, what="the view at the driver's size")
            status = status_for(view, tty)
            assert "150x45" in status and "60x14" in status and "enlarge" in status, status

            def same_wide_line() -> bool:  # a line wider than the seat's terminal reaches the view whole
                main = [
                    ln.rstrip()
                    for ln in tmux(sock, "capture-pane", "-p", "-t", f"={name}:").stdout.splitlines()
                ]
                seen = {
                    ln.rstrip() for ln in tmux(view, "capture-pane", "-p", "-t", "=view:").stdout.splitlines()
                }
                return any(len(ln) > 100 and ln in seen for ln in main)

            wait_for(same_wide_line, 60, what="a full-width line of the driver's screen in the view")

            # the driver resizes: the view follows (the driver's app fits it), the seat is told again
            resize(driver, 100, 30)
            wait_for(lambda: size_of(sock, f"={name}:") == "100x30", 20, what="the driver's window resized")
            wait_for(lambda: size_of(view, "=view:") == "100x30", 20, what="the view following the driver")
            assert "100x30" in status_for(view, tty)

            # a seat whose terminal holds the driver's screen is told it sees all of it
            big = Terminal(view_join, user=viewer, size=(120, 40))
            terms.append(big)
            (big_tty,) = wait_for(
                lambda: [t for t in seat_ttys(view) if t != tty], 30, what="the second client"
            )
            wide = status_for(view, big_tty)
            assert "enlarge" not in wide and "read-only view" in wide and "100x30" in wide, wide
            assert size_of(sock, f"={name}:") == "100x30"  # no seat ever sized the driver's window
        finally:
            for term in terms:
                term.close()
            tmux(view, "kill-server")
            tmux(sock, "kill-server")
