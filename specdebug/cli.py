"""Command line: `specdebug HOST...` opens the TUI; `specdebug VERB ...` runs a headless twin.

Verbs come from the table in specdebug/verbs/table.py: name, module under specdebug/verbs/,
one-line help.  Only the module of the verb that runs is imported (`specdebug --help` must not pay
for asyncssh, httpx or the TUI).  A verb the local agent serves (`specdebug VERB ...`) is asked of
it before the table is imported: a warm answer costs the interpreter, os, socket and json.

Options may come before the verb, as with OpenSSH (`specdebug -F cfg probe box`): they are moved
behind the verb and parsed by the verb's own parser.
Exit codes: 0 ok, 1 the thing checked failed, 2 usage or config error.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy takes the name as True)

if TYPE_CHECKING:
    import argparse

EPILOG = """\
Without a verb: specdebug [-F FILE] [-c PROFILE] HOST [HOST ...] opens the TUI (needs a terminal).
Options may come before the verb, as with ssh: specdebug -F ./ssh_config probe gpubox --json.
`specdebug VERB --help` describes a verb. Exit codes: 0 ok, 1 the checked thing failed, 2 usage/config error.
"""


_TABLE_NAMES = frozenset({"VALUE_OPTIONS", "VERBS", "deepest", "verb_named", "verb_parser"})


def __getattr__(name: str) -> object:
    """The verb table's names, as `specdebug.cli.verb_parser` was, imported on first use only."""
    if name in _TABLE_NAMES:
        from specdebug.verbs import table

        return getattr(table, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def top_parser() -> argparse.ArgumentParser:
    """The top-level parser for help only: verbs listed from the table, no verb module imported."""
    import argparse

    from specdebug.verbs.table import VERBS

    class Formatter(argparse.RawDescriptionHelpFormatter):
        """argparse's, told the terminal's width (its own asks shutil, which imports bz2 and lzma)."""

        def __init__(self, prog: str) -> None:
            super().__init__(prog, width=_columns() - 2)

    parser = argparse.ArgumentParser(
        prog="specdebug",
        description="Debug speculative-decoding LLM servers on remote GPU boxes over SSH.",
        epilog=EPILOG,
        formatter_class=Formatter,
    )
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    for verb in VERBS:
        sub.add_parser(verb.name, help=verb.help, add_help=False)
    return parser


def _columns() -> int:
    """The terminal's width as shutil.get_terminal_size finds it: $COLUMNS, the terminal, else 80."""
    import os

    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns if sys.__stdout__ else 0
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


def split_leading_options(argv: list[str]) -> tuple[list[str], int]:
    """(options before the first positional, index of that positional or len(argv))."""
    from specdebug.verbs.table import VALUE_OPTIONS

    i = 0
    while i < len(argv):
        tok = argv[i]
        if not tok.startswith("-") or tok == "-":
            break
        if tok == "--":
            return argv[:i], i + 1 if i + 1 < len(argv) else len(argv)
        name = tok.split("=", 1)[0]
        takes_value = name in VALUE_OPTIONS and "=" not in tok
        attached = len(tok) > 2 and not tok.startswith("--") and tok[:2] in VALUE_OPTIONS  # -Fcfg
        i += 2 if takes_value and not attached else 1
    return argv[: min(i, len(argv))], min(i, len(argv))


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    asked = False
    if argv and not argv[0].startswith("-"):
        from specdebug.agent import AGENT_VERBS

        if argv[0] in AGENT_VERBS:  # `specdebug probe ...`: a warm agent answers before any other import
            from specdebug.agent.client import try_run

            answered, asked = try_run(argv[0], argv[1:]), True
            if answered is not None:
                return answered
    from specdebug.verbs.table import verb_named, verb_parser

    leading, at = split_leading_options(argv)
    if not argv or any(tok in ("-h", "--help") for tok in leading):
        top_parser().print_help()
        return 0
    if "--version" in leading:
        from specdebug import __version__

        print(f"specdebug {__version__}")
        return 0
    first = argv[at] if at < len(argv) else None
    if first == "help":
        rest = argv[at + 1 :]
        if rest and verb_named(rest[0]):
            verb_parser(rest[0]).print_help()
            return 0
        top_parser().print_help()
        return 0 if not rest else 2
    if first is not None and verb_named(first) is not None:
        rest = argv[at + 1 :]
        # leading options go behind the verb (before a `--`, which ends the options)
        cut = rest.index("--") if "--" in rest else len(rest)
        return run_verb(first, [*rest[:cut], *leading, *rest[cut:]], ask_agent=not asked)
    if first is not None:
        guess = mistyped_verb(first, argv)
        if guess is not None:  # `specdebug prbe box` must not open a TUI retrying a host `prbe`
            print(f"specdebug: unknown verb {first!r}; did you mean {guess!r}?", file=sys.stderr)
            return 2
    from specdebug.verbs.tui import run_tui_from_argv

    return _finish(run_tui_from_argv(argv))


def mistyped_verb(word: str, argv: list[str]) -> str | None:
    """The verb `word` is a typo of, when it is close to one and cannot be a host: not a host
    spec's shape (`user@h`, `h:22`, `h.example`), no ssh config `Host` names it, no resolver knows it."""
    import difflib

    from specdebug.verbs.table import VERBS

    if any(c in word for c in "@:.[]/") or word.startswith("-"):
        return None
    close = difflib.get_close_matches(word, [v.name for v in VERBS], n=1, cutoff=0.75)
    if not close:
        return None
    from specdebug.transport.ssh.known_host import host_is_known

    return None if host_is_known(word, ssh_config_arg(argv)) else close[0]


def ssh_config_arg(argv: list[str]) -> str | None:
    """The value of -F/--ssh-config in argv, in any of its spellings."""
    for i, tok in enumerate(argv):
        if tok in ("-F", "--ssh-config") and i + 1 < len(argv):
            return argv[i + 1]
        if tok.startswith("--ssh-config="):
            return tok.split("=", 1)[1]
        if tok.startswith("-F") and len(tok) > 2:
            return tok[2:]
    return None


def run_verb(name: str, argv: list[str], *, ask_agent: bool = True) -> int:
    from specdebug.agent import AGENT_VERBS

    if ask_agent and name in AGENT_VERBS:
        from specdebug.agent.client import try_run

        answered = try_run(name, argv)  # a running local agent (kept connections) answers without imports
        if answered is not None:
            return answered
    from specdebug.acting import set_acting
    from specdebug.verbs.table import deepest, verb_parser

    set_acting(f"specdebug {name}")  # named in the marks this run leaves on server records
    parser = verb_parser(name)
    args, extras = parser.parse_known_args(argv)
    if extras:
        deepest(parser, argv).error(f"unrecognized arguments: {' '.join(extras)}")
    if not getattr(args, "func", None):
        deepest(parser, argv).print_help(sys.stderr)
        return 2
    from specdebug.errors import SpecdebugError
    from specdebug.verbs.common import VerbExit, fail
    from specdebug.verbs.connecting import ONE_SHOT, OPENSSH_VERBS

    if name in OPENSSH_VERBS:  # no agent answered: this verb's connection goes through the system's ssh,
        ONE_SHOT.set(True)  # whose handshake starts now, beside the imports of what the verb runs
        if getattr(args, "host", None):
            from specdebug.remote.openssh import start_early
            from specdebug.verbs.connecting import DEFAULT_CONNECT_TIMEOUT_S

            start_early(
                args.host,
                getattr(args, "ssh_config", None),
                accept_new=bool(getattr(args, "accept_new_host_key", False)),
                connect_timeout=getattr(args, "connect_timeout", DEFAULT_CONNECT_TIMEOUT_S),
            )
    try:
        return _finish(args.func(args))
    except VerbExit as exc:
        return exc.code
    except SpecdebugError as exc:  # the error root, rendered once: its line, its hint, its exit code
        return fail(exc)


def _finish(result: object) -> int:
    import inspect

    from specdebug.verbs.common import VerbExit

    try:
        if inspect.iscoroutine(result):
            import asyncio
            import signal

            # SIGTERM ends a verb as Ctrl+C does: asyncio.run cancels the verb's task, so it can say
            # what keeps running and what was not recorded (the default SIGTERM ends it mute)
            if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not where SIGINT is ignored
                signal.signal(signal.SIGTERM, lambda *_: signal.raise_signal(signal.SIGINT))
            result = asyncio.run(result)
    except KeyboardInterrupt:
        return 130
    except VerbExit as exc:
        return exc.code
    except BrokenPipeError:  # `specdebug grep ... | head`: the reader left, not an error of ours
        _silence_stdout()
        return 0
    return result if isinstance(result, int) else 0


def _silence_stdout() -> None:
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def entry() -> None:
    """Exit with main()'s code; a reader that left early (`| head`) ends every verb quietly, sync or
    async, including the final flush, which would else print "Exception ignored ... BrokenPipeError"."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
        code = 0
    sys.exit(code)


if __name__ == "__main__":
    entry()
