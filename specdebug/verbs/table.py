"""The verb table: every verb's name, the module under specdebug/verbs/ that registers it, and its
one-line help (written here only: `specdebug --help` lists verbs without importing their modules).

Why apart from cli.py: the verbs and the command line both need the table (the TUI verb refuses a
verb taken for a host, the local agent parses a verb's arguments), and none of them imports cli.
A verb module exposes `register(subparsers)`, which adds its parser(s) and sets `func` (sync or
async, returning the exit code).  Adding a verb = one line in VERBS + its module.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy takes the name as True)
if TYPE_CHECKING:
    import argparse


class Verb:
    """One verb (a plain class: `specdebug --help` imports neither typing nor argparse's helpers here)."""

    __slots__ = ("name", "module", "help")

    def __init__(self, name: str, module: str, help: str) -> None:  # noqa: A002 - argparse's word
        self.name = name
        self.module = module  # under specdebug.verbs; one module may register several verbs
        self.help = help  # shown by `specdebug --help` without importing the module

    def __repr__(self) -> str:
        return f"Verb({self.name!r}, {self.module!r}, {self.help!r})"


# in help order
VERBS: list[Verb] = [
    Verb("probe", "probe", "connect to a host and print its state and GPUs"),
    Verb("demo", "demo", "open the TUI on the simulated speculative-decoding box (--check: no screen)"),
    Verb(
        "sim",
        "sim",
        "run a simulated speculative-decoding server (`--engine`, `--help`); `sim install-box`: this machine as a sim box",
    ),
    Verb("profile", "profile", "check, diff and describe server profiles (TOML)"),
    Verb("launch", "launch", "start a server from a profile, detached (--wait: until ready)"),
    Verb("restart", "launch", "stop the profile's server, then launch it again"),
    Verb("stop", "launch", "stop the profile's server (its process group: TERM, then KILL)"),
    Verb("status", "launch", "is the profile's server running, and healthy?"),
    Verb("attach", "launch", "watch a server started by hand (by its port or --pid)"),
    Verb("scan", "scan", "parse a server log after the fact: metric stats and event counts"),
    Verb("grep", "grep", "print log lines matching regexes (on the box), optionally following"),
    Verb("env", "env", "check which env vars each worker process really has"),
    Verb(
        "bench",
        "bench",
        "benchmark a server (built-in streaming client or the profile's command); --parse a saved output",
    ),
    Verb(
        "metrics",
        "metrics",
        "read the server's Prometheus /metrics (rates over a window) through the SSH forward",
    ),
    Verb("history", "history", "list the benchmark results of a session"),
    Verb("mark", "history", "add a mark to the session journal (shown in the report)"),
    Verb("report", "history", "markdown report of a session: results, config diffs, notes"),
    Verb("drift", "drift", "what can move a number besides the profile: packages, patched files, GPUs"),
    Verb("stacks", "stacks", "py-spy stacks of every worker, grouped across ranks (--record S)"),
    Verb("spec", "spec", "speculation arithmetic: cycle cost, predicted tok/s, verify fit"),
    Verb(
        "bisect",
        "bisect",
        "find the knob(s) that make the bad profile slower than the good one, in the fewest launches",
    ),
    Verb("agent", "agent", "the local agent that keeps SSH connections warm: status or stop"),
    Verb("pair", "pair", "share the TUI in a tmux session: read-only or read-write seats for other users"),
]

# options that take a value and may stand before the verb or the hosts (the TUI's and ssh's);
# any other leading option is taken as a switch when looking for the verb
VALUE_OPTIONS = frozenset(
    {"-F", "--ssh-config", "-c", "--profile", "--layout", "--session", "--connect-timeout", "--state-dir"}
)


def verb_named(name: str) -> Verb | None:
    return next((v for v in VERBS if v.name == name), None)


def _parser_class() -> type[argparse.ArgumentParser]:
    """An ArgumentParser that tells its sub-commands, which argparse keeps to itself (made on first
    use: the table is imported before argparse is needed)."""
    global _PARSER
    if _PARSER is None:
        import argparse

        class _Parser(argparse.ArgumentParser):
            @property
            def subcommands(self) -> dict[str, argparse.ArgumentParser]:
                """Name -> parser of the sub-commands added so far (none: {})."""
                for action in self._actions:
                    # the sub-parsers action (argparse.PARSER nargs), not named: its class is private
                    if action.nargs == argparse.PARSER and isinstance(action.choices, dict):
                        return action.choices
                return {}

        _PARSER = _Parser
    return _PARSER


_PARSER: type[argparse.ArgumentParser] | None = None


def verb_parser(name: str) -> argparse.ArgumentParser:
    """The parser of one verb (prog `specdebug VERB`), importing only that verb's module."""
    import importlib

    verb = verb_named(name)
    if verb is None:
        raise KeyError(name)
    module = importlib.import_module(f"specdebug.verbs.{verb.module}")
    holder = _parser_class()(prog="specdebug")  # sub-parsers made under it are _Parsers too
    sub = holder.add_subparsers(dest="verb", metavar="VERB")
    module.register(sub)
    return sub.choices[name]


def deepest(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.ArgumentParser:
    """The innermost sub-command parser named in argv (`profile check`), so errors show its usage."""
    subcommands = getattr(parser, "subcommands", None) if isinstance(parser, _parser_class()) else None
    if subcommands:
        for i, tok in enumerate(argv):
            if tok in subcommands:
                return deepest(subcommands[tok], argv[i + 1 :])
    return parser
