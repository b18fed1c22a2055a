"""Command line: `specdebug HOST...` opens the TUI; `specdebug VERB ...` runs a headless twin.

Each verb lives in its own module under specdebug/verbs/ and exposes `register(subparsers)`,
which adds its parser and sets `func` (sync or async, returning the exit code).
Exit codes: 0 ok, 1 the thing checked failed, 2 usage or config error.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import sys

# verb module names under specdebug.verbs, in help order
VERB_MODULES = [
    "probe",
    "demo",
    "sim",
    "profile",
    "launch",
    "scan",
    "grep",
    "env",
    "bench",
    "history",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="specdebug",
        description="Debug speculative-decoding LLM servers on remote GPU boxes over SSH.",
        epilog="Without a verb: specdebug [-F FILE] HOST [HOST ...] opens the TUI.",
    )
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    for name in VERB_MODULES:
        try:
            module = importlib.import_module(f"specdebug.verbs.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"specdebug.verbs.{name}":
                continue  # verb not built yet
            raise
        module.register(sub)
    return parser


def _known_verbs(parser: argparse.ArgumentParser) -> set[str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return set(action.choices)
    return set()


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    first = next((a for a in argv if not a.startswith("-")), None)
    verbs = _known_verbs(parser)
    if first is not None and first not in verbs and first != "help":
        from specdebug.verbs.tui import run_tui_from_argv

        return _finish(run_tui_from_argv(argv))
    if not argv or first is None:
        parser.print_help()
        return 0 if not argv or "-h" in argv or "--help" in argv else 2
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from specdebug.verbs.common import VerbExit

    try:
        return _finish(args.func(args))
    except VerbExit as exc:
        return exc.code
    except OSError as exc:  # a full disk under the session folder: one line, never a traceback
        from specdebug.core.journal import JournalError

        if not isinstance(exc, JournalError):
            raise
        print(f"specdebug: {exc.strerror}", file=sys.stderr)
        return 1


def _finish(result: object) -> int:
    from specdebug.verbs.common import VerbExit

    try:
        if inspect.iscoroutine(result):
            result = asyncio.run(result)
    except KeyboardInterrupt:
        return 130
    except VerbExit as exc:
        return exc.code
    except BrokenPipeError:  # `specdebug grep ... | head`: the reader left, not an error of ours
        _silence_stdout()
        return 0
    return int(result or 0)


def _silence_stdout() -> None:
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
