"""`specdebug [-F FILE] HOST [HOST ...]`: open the TUI on one or more hosts."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from typing import TYPE_CHECKING

from specdebug.verbs.common import out

if TYPE_CHECKING:
    from specdebug.remote.api import Connection
    from specdebug.tui.context import AppContext
    from specdebug.tui.pane import RunningServer

NO_TERMINAL = (
    "the TUI needs a terminal (stdin and stdout must be a tty); for scripts use a headless verb, "
    "e.g. `specdebug probe HOST --json` (`specdebug --help` lists them)"
)


def has_terminal() -> bool:
    """A TUI on a pipe floods it with escape codes and never ends: refuse instead.  A web driver
    (textual-serve sets TEXTUAL_DRIVER for the browser seat) talks its own protocol over the pipe."""
    if "web_driver" in os.environ.get("TEXTUAL_DRIVER", ""):
        return True
    return sys.stdin.isatty() and sys.stdout.isatty()


def tui_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="specdebug", description="Open the specdebug TUI on HOST(s).")
    p.add_argument("-F", "--ssh-config", metavar="FILE", help="ssh config file (default ~/.ssh/config)")
    p.add_argument("-c", "--profile", metavar="PROFILE", help="server profile (TOML) the panes act on")
    p.add_argument("--layout", default="default", help="layout name from layouts/ (default: default)")
    p.add_argument(
        "--session", metavar="DIR", help="session folder (journal), or box:NAME (kept on the box, shared)"
    )
    p.add_argument("--new-session", action="store_true", help="start a new session folder")
    p.add_argument("--readonly", action="store_true", help="disable every action that changes the box")
    from specdebug.verbs.common import add_state_dir_arg

    add_state_dir_arg(p)
    p.add_argument(
        "hosts",
        nargs="*",
        metavar="HOST",
        help="HOST, user@HOST, user@HOST:PORT or an ssh config alias "
        "(none with a -c PROFILE whose [deployment] names its nodes)",
    )
    return p


def build_context(args: argparse.Namespace, remotes: dict[str, Connection]) -> AppContext:
    from specdebug.tui.context import AppContext

    ctx = AppContext(remotes=remotes, selected=next(iter(remotes), None), readonly=args.readonly)
    ctx.ssh_config = args.ssh_config
    if args.profile:
        from specdebug.core.profiles import load_profile
        from specdebug.resources import profile_path

        ctx.profile_path = profile_path(args.profile)
        ctx.profile = load_profile(ctx.profile_path)
        if ctx.profile.deployment is not None:  # the panes act on the deployment, from its leader
            ctx.selected = ctx.profile.deployment.nodes[0]
        ctx.profile_choices = sorted(ctx.profile_path.resolve().parent.glob("*.toml"))
    from specdebug.core.boxjournal import BoxJournal, box_spec
    from specdebug.core.journal import Journal, resolve_session

    # `box:NAME`: kept on the box, shared by every instance (a bad name is a ValueError)
    spec = box_spec(args.session)
    if spec is not None:
        host = ctx.remote()
        if host is None:
            raise ValueError("--session box:NAME needs a host to keep the journal on")
        ctx.journal = BoxJournal(host, spec)
        return ctx
    # the latest session by default: its launches give the startup ETA, its results the history
    session_dir = (  # a session is per target: the latest of the host the TUI opens on
        Journal.default_dir()
        if args.new_session
        else resolve_session(args.session, for_writing=True, target=ctx.selected)
    )
    ctx.session_dir = session_dir
    ctx.journal = Journal(session_dir)
    return ctx


def tui_hosts(args: argparse.Namespace) -> list[str]:
    """The hosts to connect: those given, then every node of the profile's `[deployment]` not among
    them (the leader first when none was given).  No host at all is one clear line."""
    hosts = list(args.hosts)
    if args.profile:
        from specdebug.core.profiles import load_profile
        from specdebug.resources import profile_path

        spec = load_profile(profile_path(args.profile)).deployment
        hosts += [n for n in (spec.nodes if spec is not None else []) if n not in hosts]
    if not hosts:
        raise ValueError("give a HOST (or -c PROFILE with a [deployment] naming its nodes)")
    return hosts


def run_app(
    ctx: AppContext | None, layout: str, ssh_config: str | None = None, boot: CommandLineBoot | None = None
) -> int:
    """Run the TUI on `ctx`, or (the command line) on what `boot` builds after the first screen."""
    from specdebug.tui.app import SpecdebugApp
    from specdebug.tui.driver import HANGUP_EXIT_CODE, terminal_hung_up

    if boot is not None:
        app = SpecdebugApp(layout=layout, boot=boot)
    else:
        app = SpecdebugApp(ctx, layout=layout, keymap=read_keymap())
    app.freeze_gc = True
    try:
        app.run()
    except OSError:  # EIO: Textual's goodbye (an error's traceback) written to a terminal that hung up
        if not terminal_hung_up.is_set():
            raise
    if terminal_hung_up.is_set():  # nothing can be printed; what keeps running is in the quit note
        save_quit_note(still_running_lines(app.still_running, ssh_config))
        return HANGUP_EXIT_CODE
    if app.boot_error is not None:
        out(f"specdebug: {app.boot_error}", file=sys.stderr)
        return 2
    for line in boot.said if boot is not None else []:
        out(line, file=sys.stderr)
    lines = still_running_lines(app.still_running, ssh_config)
    save_quit_note(lines)
    for line in lines:
        out(line)
    return 0


def read_keymap() -> dict[str, str]:
    from specdebug.tui.app import KeymapFile, binding_ids, load_keymap

    try:
        return load_keymap(known=binding_ids())
    except (OSError, ValueError) as exc:
        out(f"specdebug: keymap ignored: {exc}", file=sys.stderr)
        return KeymapFile()


class CommandLineBoot:
    """What `specdebug HOST...` opens, built after the TUI's first screen (tui.app.Boot): the
    modules in a thread, then the connections and the session journal on the app's loop."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.hosts: list[str] = list(args.hosts)  # a profile's [deployment] nodes join at build
        self.readonly: bool = args.readonly
        self.said: list[str] = []  # warnings for stderr once the screen is gone

    def imports(self) -> None:
        """What the connections and the journal need (asyncssh, the pydantic models), in a thread."""
        import importlib

        for module in ("remote.factory", "core.profiles", "core.journal", "core.boxjournal"):
            importlib.import_module(f"specdebug.{module}")

    def imports_panes(self) -> None:
        """Every pane, screen and widget, in a thread while the hosts connect."""
        from specdebug.tui.app import binding_ids

        binding_ids()

    def build(self) -> AppContext:
        from specdebug.core.profiles import ProfileError
        from specdebug.remote.api import HostSpecError
        from specdebug.remote.factory import ConnectOptions, HostKeyPrompt, SSHOptions, connect_host
        from specdebug.tui.app import BootFailed

        args = self.args
        prompt = HostKeyPrompt()  # the app's host-key screen answers it once it is up
        options = ConnectOptions(
            ssh=SSHOptions(ssh_config=args.ssh_config, on_host_key=prompt), state_dir=args.state_dir
        )
        remotes = {}
        try:
            for host in tui_hosts(args):
                remote = connect_host(host, options)
                self.said += [f"specdebug: warning: {w}" for w in remote.warnings]
                remotes[host] = remote
            ctx = build_context(args, remotes)
        except (HostSpecError, ProfileError, ValueError) as exc:
            raise BootFailed(str(exc)) from exc
        ctx.host_key_prompt = prompt
        return ctx

    def keymap(self) -> dict[str, str]:
        from specdebug.tui.app import KeymapFile, binding_ids, load_keymap

        try:
            return load_keymap(known=binding_ids())
        except (OSError, ValueError) as exc:  # said on the screen (the app owns the terminal now)
            return KeymapFile(problems=[f"keymap ignored: {exc}"])


def save_quit_note(lines: list[str]) -> None:
    """In a pairing session the pane (and what it printed) goes away with tmux: `specdebug pair` names a
    file of its own (SPECDEBUG_QUIT_NOTE, in a private folder) and prints these lines in the driver's
    terminal once the session has ended."""
    path = os.environ.get("SPECDEBUG_QUIT_NOTE")
    if not path or not lines:
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError:
        return  # not ours to write (it exists, or its folder is gone): the pane showed the lines
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def still_running_lines(servers: list[RunningServer], ssh_config: str | None = None) -> list[str]:
    """One line per server left running at quit (right on a real box: it took minutes to start),
    with the exact command that stops it."""
    lines = []
    for srv in servers:
        cmd = ["specdebug", "stop"] + (["-F", ssh_config] if ssh_config else [])
        cmd += [srv.host, "-c", srv.profile_path or srv.profile]
        where = ", ".join(
            x for x in (f"PID {srv.pid}" if srv.pid else "", f"port {srv.port}" if srv.port else "") if x
        )
        lines.append(
            f"specdebug: {srv.profile} is still running on {srv.host}"
            + (f" ({where})" if where else "")
            + f"; stop it with: {shlex.join(cmd)}"
        )
    return lines


def run_tui_from_argv(argv: list[str]) -> int:
    args = tui_parser().parse_args(argv)
    from specdebug.verbs.table import verb_named

    verbs = [h for h in args.hosts if verb_named(h)]
    if verbs:  # `specdebug --unknown-opt VALUE probe box`: the verb was taken for a host
        out(
            f"specdebug: {verbs[0]!r} is a verb, not a host: put options after the verb "
            f"(specdebug {verbs[0]} --help)",
            file=sys.stderr,
        )
        return 2
    if not has_terminal():
        out(f"specdebug: {NO_TERMINAL}", file=sys.stderr)
        return 2
    from specdebug.acting import set_acting

    set_acting("the specdebug TUI")  # named in the marks it leaves on server records (stop, launch)

    if args.readonly:  # default-deny for the whole process, before anything connects
        from specdebug.capability import enter_readonly_process

        enter_readonly_process()
    from specdebug.tui.settings import find_layout

    try:
        find_layout(args.layout)
    except ValueError as exc:
        out(f"specdebug: {exc}", file=sys.stderr)
        return 2
    if not args.hosts and not args.profile:
        out("specdebug: give a HOST (or -c PROFILE with a [deployment] naming its nodes)", file=sys.stderr)
        return 2
    # the first screen comes before the heavy imports: the connections are built behind it
    return run_app(None, args.layout, args.ssh_config, boot=CommandLineBoot(args))
