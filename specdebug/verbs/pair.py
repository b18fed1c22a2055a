"""`specdebug pair`: the TUI in a shared tmux session with seats for other users, or a browser seat.

    specdebug pair [-F FILE] HOST... [-c PROFILE] [--name NAME] [--allow USER]... [--allow-ro USER]...
                   [--detach] [--json]
    specdebug pair --join NAME [--readonly] [--socket PATH] [--owner USER]
    specdebug pair --list [--json]
    specdebug pair --grant USER [--rw] | --revoke USER  [--name NAME] [--json]
    specdebug pair --web [HOST... [-c PROFILE] [--session box:NAME]] [--name NAME] [--port N]

Read-only is tmux's (server-access, tmux >= 3.3); see specdebug/core/pair/session.py for the folder.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from specdebug.core.pair import find as pair_find
from specdebug.core.pair import session as pair
from specdebug.core.pair import view as pair_view
from specdebug.core.pair.owner import user_name
from specdebug.core.pair.session import Mode, PairError
from specdebug.resources import profile_path
from specdebug.verbs.common import err, out, print_json


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "pair",
        description="Start a pairing session (the TUI in tmux on its own socket, seats granted with tmux's "
        "server-access), join one, list them, or serve a read-only browser seat (--web).",
    )
    p.add_argument("-F", "--ssh-config", metavar="FILE", help="ssh config file (default ~/.ssh/config)")
    p.add_argument("-c", "--profile", metavar="PROFILE", help="server profile (TOML) the panes act on")
    p.add_argument(
        "--session", metavar="DIR|box:NAME", help="journal for the app (box:NAME: kept on the box)"
    )
    p.add_argument("--layout", help="layout name for the app")
    p.add_argument("--name", default="pair", help="session name (default: pair)")
    p.add_argument("--allow", action="append", default=[], metavar="USER", help="read-write seat (trusted!)")
    p.add_argument("--allow-ro", action="append", default=[], metavar="USER", help="read-only seat")
    p.add_argument("--detach", action="store_true", help="start the session and return (do not attach)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--join", metavar="NAME", help="attach to the pairing session NAME")
    p.add_argument("--readonly", action="store_true", help="with --join: attach read-only")
    p.add_argument("--socket", metavar="PATH", help="with --join: the session's tmux socket")
    p.add_argument(
        "--owner",
        metavar="USER",
        help="with --join: the user whose session you mean to join (another user's is joined only "
        "after you say yes at the terminal, or with this)",
    )
    p.add_argument("--list", action="store_true", help="list the pairing sessions you may join")
    p.add_argument(
        "--grant", metavar="USER", help="give USER a read-only seat in your session --name (again)"
    )
    p.add_argument("--rw", action="store_true", help="with --grant: a read-write seat (trusted!)")
    p.add_argument("--revoke", metavar="USER", help="take USER's seat away (disconnects them)")
    p.add_argument(
        "--web", action="store_true", help="show your session --name to browsers on 127.0.0.1 (read-only)"
    )
    p.add_argument("--port", type=int, default=0, help="with --web: port (default: a free one)")
    p.add_argument(
        "hosts", nargs="*", metavar="HOST", help="hosts the shared TUI opens (as for `specdebug HOST`)"
    )
    p.set_defaults(func=cmd_pair)


def cmd_pair(args: argparse.Namespace) -> int:
    try:
        if args.list:
            return _list(args)
        if args.join:
            return _join(args)
        if args.grant or args.revoke:
            return _change_seat(args)
        if args.web:
            return _web(args)
        if not args.hosts:
            err("pair: give HOST... to start a session, or --join NAME, or --list")
            return 2
        return _start(args)
    except PairError as exc:
        err(str(exc))
        return 2


def _web(args: argparse.Namespace) -> int:
    """The browser seat: the screen of your pairing session --name (started here with HOST...,
    and ended with the seat), mirrored (specdebug/tui/mirror.py): it shows, never acts or reads."""
    try:
        from specdebug.tui.webseat import serve_web_seat
    except ModuleNotFoundError as exc:
        err(f"pair --web needs textual-serve ({exc.name}): pip install 'specdebug[web]'")
        return 2
    name = pair.check_name(args.name)
    sock = str(pair.folder_for(name) / pair.SOCKET_FILE)
    started = False
    if not pair.is_alive(sock):
        if not args.hosts:
            err(f"pair --web: no running pairing session {name!r} of yours: give HOST... to start one")
            return 2
        pair.start(name, app_argv(args), _seats(args))
        started = True
        out(f"pairing session {name!r} started; drive it with: specdebug pair --join {name}")
    title = f"specdebug pairing {name} of {user_name(os.getuid())} (read-only browser seat)"
    mirror = [sys.executable, "-m", "specdebug.tui.mirror", sock, f"={name}:", title]
    try:
        return serve_web_seat(mirror, port=args.port)
    finally:
        if started:
            pair.kill(sock)


def app_argv(args: argparse.Namespace, *, readonly: bool = False) -> list[str]:
    """The TUI command the session runs: the same hosts and profile, paths made absolute."""
    argv = [sys.executable, "-m", "specdebug.cli"]
    if args.ssh_config:
        argv += ["-F", str(Path(args.ssh_config).resolve())]
    if args.profile:
        argv += ["-c", str(profile_path(args.profile).resolve())]
    if args.session:
        session = args.session
        argv += ["--session", session if session.startswith("box:") else str(Path(session).resolve())]
    if args.layout:
        argv += ["--layout", args.layout]
    if readonly:
        argv.append("--readonly")
    return argv + list(args.hosts)


def _seats(args: argparse.Namespace) -> dict[str, Mode]:
    seats: dict[str, Mode] = {}
    for user in args.allow_ro:
        seats[user] = Mode.RO
    for user in args.allow:
        if user in seats:
            raise PairError(f"{user} is in both --allow and --allow-ro: pick one")
        seats[user] = Mode.RW
    return seats


def _start(args: argparse.Namespace) -> int:
    if args.profile and not profile_path(args.profile).is_file():
        err(f"profile {args.profile}: no such file")
        return 2
    note_dir = Path(tempfile.mkdtemp(prefix="specdebug-quit-"))  # private (0700): the app's quit note
    note = note_dir / "still-running.txt"
    argv = ["env", f"SPECDEBUG_QUIT_NOTE={note}", *app_argv(args)]
    try:
        return _start_in(args, argv, note)
    finally:
        shutil.rmtree(note_dir, ignore_errors=True)


def _start_in(args: argparse.Namespace, argv: list[str], note: Path) -> int:
    info = pair.start(pair.check_name(args.name), argv, _seats(args))
    if args.json:
        print_json(info.to_json())
    else:
        out(f"pairing session {info.name!r} on {info.socket} (access: {info.access})")
        for seat in info.seats:
            mode = "read-only" if seat.mode is Mode.RO else "read-write (can run commands as you!)"
            out(f"  seat {seat.user}: {mode}")
        out(f"seats join with:  {info.join}")
        out(f"             or:  specdebug pair --join {info.name}")
        sys.stdout.flush()
    if args.detach:
        return 0
    rc = _attach(pair.join_argv(info.socket, info.session))
    if pair.is_alive(info.socket):
        out(f"detached; the session goes on. Back in: specdebug pair --join {info.name}")
    else:  # the app quit: what it said about servers left running, here where the driver sees it
        with contextlib.suppress(OSError):
            for line in note.read_text(encoding="utf-8").splitlines()[:50]:
                out(line, newlines=False)
    return rc


def _attach(argv: list[str]) -> int:
    if not sys.stdin.isatty():
        err(f"not a terminal: run this in one ({shlex.join(argv)})")
        return 2
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
    return subprocess.run(argv, env=env).returncode


def _join(args: argparse.Namespace) -> int:
    info = pair_find.find(args.join, args.socket)
    argv = pair.join_argv(info.socket, info.session, readonly=args.readonly)
    pair_find.check_owner(info, args.owner)  # --owner USER names someone else: refused
    if args.json:
        print_json({**info.to_json(), "join": shlex.join(argv)})
        return 0
    # said before attaching: whose screen this is (folder and socket checked to be theirs)
    out(f"joining pairing session {info.name!r} of {info.owner} (uid {info.owner_uid}): {info.socket}")
    sys.stdout.flush()
    if info.owner_uid != os.getuid() and args.owner is None and not _agreed_to_join(info):
        return 2
    return _attach(argv)


def _agreed_to_join(info: pair.PairInfo) -> bool:
    """Another user's screen is joined only once the user says so at the terminal: what is typed
    there goes to that user's programs (a look-alike prompt there took a password).  No terminal to
    ask on: refused, naming --owner."""
    if not sys.stdin.isatty():
        err(
            f"pair --join {info.name}: not joining: the session is {info.owner}'s (uid {info.owner_uid}), "
            f"not yours, and there is no terminal to ask on; give --owner {info.owner} to join it"
        )
        return False
    out(
        f"This is {info.owner}'s session, not yours: what you type there goes to {info.owner}'s "
        "programs (never type a password into it). Join? [y/N] ",
        end="",
    )
    answer = sys.stdin.readline(64).strip().lower()
    if answer in ("y", "yes"):
        return True
    err(f"pair --join {info.name}: not joined")
    return False


def _change_seat(args: argparse.Namespace) -> int:
    """--grant/--revoke USER on your own running session --name (the headless twin of the palette)."""
    if args.grant and args.revoke:
        err("pair: --grant and --revoke: one at a time")
        return 2
    sock = str(pair.folder_for(pair.check_name(args.name)) / pair.SOCKET_FILE)
    if not pair.is_alive(sock):
        err(f"pair: no running pairing session {args.name!r} of yours (specdebug pair --list)")
        return 2
    user = args.grant or args.revoke
    pair.user_uid(user)  # an unknown user: one clear line
    if args.grant:
        mode = Mode.RW if args.rw else Mode.RO
        pair.grant(sock, user, mode)
        what = f"{user} has a {'read-write' if args.rw else 'read-only'} seat"
    else:
        pair.revoke(sock, user)
        what = f"{user}'s seat is revoked"
    if args.json:
        print_json(
            {
                "name": args.name,
                "user": user,
                "seats": pair_view.seat_modes(sock, Path(sock).parent),
                "done": what,
            }
        )
    else:
        out(f"pairing session {args.name!r}: {what}")
    return 0


def _list(args: argparse.Namespace) -> int:
    refused: list[str] = []
    found = pair_find.discover(refused=refused)
    if args.json:
        print_json({"sessions": [p.to_json() for p in found], "refused": refused})
        return 0
    for why in refused:
        err(f"not listed (a look-alike): {why}")
    if not found:
        out("no pairing sessions you may join")
        return 0
    for info in found:
        seats = ", ".join(f"{s.user} ({s.mode})" for s in info.seats) or "no seats"
        out(f"{info.name}  owner {info.owner}  seats: {seats}")
        out(f"  join: specdebug pair --join {info.name}   (or: {info.join})")
    return 0
