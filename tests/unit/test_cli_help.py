"""Every flag of every verb has help; usage errors show the verb's own usage."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from specdebug.sim.server.sglang.options import build_parser as sim_parser
from specdebug.verbs.table import VERBS, verb_parser
from specdebug.verbs.tui import tui_parser
from tests import clifork


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return clifork.run(
        [sys.executable, "-m", "specdebug.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def undocumented(parser: argparse.ArgumentParser, path: str) -> list[str]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                if not helps.get(name):
                    out.append(f"{path} {name} (sub-command)")
                out += undocumented(sub, f"{path} {name}")
        elif isinstance(action, argparse._HelpAction):
            continue
        elif not action.help or action.help == argparse.SUPPRESS:
            out.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
    return out


def test_every_option_of_every_verb_has_help() -> None:
    missing = []
    for verb in VERBS:
        missing += undocumented(verb_parser(verb.name), f"specdebug {verb.name}")
    missing += undocumented(sim_parser("specdebug sim"), "specdebug sim")
    missing += undocumented(tui_parser(), "specdebug")
    assert not missing, "options without help text:\n" + "\n".join(missing)


def test_sim_help_names_specdebug_sim() -> None:
    r = run_cli("sim", "--help")
    assert r.returncode == 0
    assert r.stdout.startswith("usage: specdebug sim ") and "python -m specdebug.sim" not in r.stdout
    assert "--throttle-gpu N" in r.stdout


@pytest.mark.parametrize(
    "argv, usage",
    [
        (["bench", "--bogus", "x"], "usage: specdebug bench"),
        (["probe", "box", "--bogus"], "usage: specdebug probe"),
        (["profile", "check", "--bogus", "a.toml"], "usage: specdebug profile check"),
        (["profile", "check"], "usage: specdebug profile check"),
        (["launch", "box"], "usage: specdebug launch"),
        (["sim", "--bogus"], "usage: specdebug sim"),
    ],
)
def test_usage_errors_print_the_verbs_usage(argv, usage) -> None:
    r = run_cli(*argv)
    assert r.returncode == 2
    assert r.stderr.startswith(usage), r.stderr
    assert "usage: specdebug [-h] VERB" not in r.stderr
