"""The verb table: lazy imports, options before the verb, and no TUI without a terminal."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys

import pytest

from specdebug.cli import main, split_leading_options
from specdebug.verbs.table import VALUE_OPTIONS, VERBS, verb_parser
from specdebug.verbs.tui import tui_parser
from tests import clifork

HEAVY = ("asyncssh", "httpx", "textual", "pydantic", "uvicorn")


def run_cli(*args: str, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    return clifork.run(
        [sys.executable, "-m", "specdebug.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        **kw,
    )


def imported_after(code: str) -> set[str]:
    """Top-level packages of HEAVY that are in sys.modules after running `code` in a fresh Python."""
    probe = (
        "import contextlib, io, json, sys\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    {code}\n"
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)!r})))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return set(json.loads(out.stdout.splitlines()[-1]))


def test_help_imports_no_heavy_module() -> None:
    assert imported_after("from specdebug.cli import main; main(['--help'])") == set()
    assert imported_after("from specdebug.cli import main; main([])") == set()


def test_a_verb_imports_only_what_it_needs() -> None:
    # probe's parser needs neither the TUI nor the HTTP client
    assert not imported_after("from specdebug.cli import verb_parser; verb_parser('probe')") & {
        "textual",
        "httpx",
        "uvicorn",
    }
    # a local verb that never connects does not load the SSH library
    assert "asyncssh" not in imported_after("from specdebug.cli import main; main(['profile', 'schema'])")


def modules_after(argv: list[str], watched: tuple[str, ...]) -> set[str]:
    """Which of `watched` (modules or packages) a fresh `python -m specdebug.cli ARGV` imported,
    read from -X importtime: the real entry point, `specdebug/__init__` and all."""
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "specdebug.cli", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "SPECDEBUG_NO_AGENT": "1"},
    )
    names = {
        line.rsplit("|", 1)[1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")
    }
    assert names, r.stderr[-2000:]
    return {w for w in watched if w in names or any(n.startswith(w + ".") for n in names)}


def test_help_through_the_entry_point_imports_no_heavy_module() -> None:
    assert modules_after(["--help"], (*HEAVY, "specdebug.core", "specdebug.remote")) == set()


def test_status_imports_neither_the_journal_nor_the_launch_path(tmp_path) -> None:
    """`status -c P` took 8.2 s against 0.14 s for `ssh box curl /health` (issue 43), 85 % of it
    imports: the verb module imported the launch path (the watch, the log stack, the journal and its
    records) that status never runs.  A status of an unreachable box (port 1: refused at once) must
    import the SSH library and the profile's models, nothing of a journal, a watch, the TUI or HTTP."""
    cfg = tmp_path / "ssh_config"
    cfg.write_text("Host box\n  HostName 127.0.0.1\n  Port 1\n")
    profile = tmp_path / "p.toml"
    profile.write_text(
        '[server]\nargv = ["python3", "-m", "http.server"]\nport = 8000\nlog_file = "/tmp/x.log"\n'
    )
    watched = (
        "textual",
        "httpx",
        "specdebug.core.journal",
        "specdebug.core.records",
        "specdebug.core.boxjournal",
        "specdebug.core.control.watch",
        "specdebug.core.logs",
        "specdebug.core.deployment.control",
        "asyncssh",
    )
    assert modules_after(["status", "-F", str(cfg), "box", "-c", str(profile)], watched) == {"asyncssh"}


def test_help_lists_every_verb_without_importing_it(capsys) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for verb in VERBS:
        assert verb.name in out


def registered(module_name: str) -> dict[str, str | None]:
    """Verb name -> the help its module gave it (None: none; argparse lists only those with one)."""
    holder = argparse.ArgumentParser(prog="specdebug")
    sub = holder.add_subparsers()
    importlib.import_module(f"specdebug.verbs.{module_name}").register(sub)
    helps = {a.dest: a.help for a in sub._choices_actions}
    return {name: helps.get(name) for name in sub.choices}


def test_table_matches_what_modules_register() -> None:
    """One line per verb: each table entry is registered by its module, no module registers a
    verb the table (and so `specdebug --help` and dispatch) does not know, and the one-line help is
    written once, in the table (a module's own copy drifted from it)."""
    by_module: dict[str, set[str]] = {}
    for verb in VERBS:
        by_module.setdefault(verb.module, set()).add(verb.name)
    for module, names in by_module.items():
        helps = registered(module)
        assert set(helps) == names, (
            f"specdebug.verbs.{module} registers {sorted(helps)}; table has {sorted(names)}"
        )
        for verb in VERBS:
            if verb.module == module:
                assert helps[verb.name] is None, f"{verb.name!r}: its help is the table's, not its module's"


@pytest.mark.parametrize(
    "argv, leading, verb_at",
    [
        (["-F", "cfg", "probe", "box"], ["-F", "cfg"], 2),
        (["-Fcfg", "probe", "box"], ["-Fcfg"], 1),
        (["--ssh-config=cfg", "probe", "box"], ["--ssh-config=cfg"], 1),
        (["--readonly", "-c", "p.toml", "box"], ["--readonly", "-c", "p.toml"], 3),
        (["probe", "-F", "cfg", "box"], [], 0),
        (["-F"], ["-F"], 1),
    ],
)
def test_split_leading_options(argv, leading, verb_at) -> None:
    assert split_leading_options(argv) == (leading, verb_at)


def value_options(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions if a.option_strings and a.nargs != 0 for s in a.option_strings}


def test_value_options_cover_the_tui_and_ssh_options() -> None:
    """Options that take a value and may stand before the verb or the hosts must be known, or
    their value would be taken for the verb."""
    missing = (value_options(tui_parser()) | value_options(verb_parser("probe"))) - VALUE_OPTIONS
    assert not missing, f"add {sorted(missing)} to specdebug.verbs.table.VALUE_OPTIONS"


def test_options_before_the_verb_reach_the_verb(tmp_path) -> None:
    missing = tmp_path / "no_such_config"
    for argv in (["-F", str(missing), "probe", "box"], ["probe", "-F", str(missing), "box"]):
        r = run_cli(*argv)
        assert r.returncode == 2, r.stderr
        assert f"ssh config file not found: {missing}" in r.stderr  # probe's parser got -F
        assert "\x1b" not in r.stdout + r.stderr  # no TUI was started


def test_tui_without_a_terminal_is_refused(tmp_path) -> None:
    cfg = tmp_path / "ssh_config"
    cfg.write_text("Host box\n  HostName 127.0.0.1\n  Port 1\n")
    r = run_cli("-F", str(cfg), "box")
    assert r.returncode == 2
    assert "needs a terminal" in r.stderr and "specdebug probe HOST --json" in r.stderr
    assert r.stdout == "" and "\x1b" not in r.stderr
    r = run_cli("demo")
    assert r.returncode == 2 and "demo --check" in r.stderr and r.stdout == ""


def test_a_verb_after_an_unknown_leading_option_is_not_a_host() -> None:
    r = run_cli("--json", "x", "probe", "box")
    assert r.returncode == 2
    r = run_cli("-c", "p.toml", "probe")  # -c takes p.toml; probe is the verb, missing its host
    assert r.returncode == 2 and "usage: specdebug probe" in r.stderr


def test_help_verb_and_unknown_verb_help() -> None:
    r = run_cli("help", "scan")
    assert r.returncode == 0 and r.stdout.startswith("usage: specdebug scan")
    r = run_cli("--help")
    assert r.returncode == 0 and "Options may come before the verb" in r.stdout


def test_a_mistyped_verb_says_which_verb(tmp_path) -> None:
    """`specdebug prbe t3box` opened a TUI on a host `prbe` (issue 26): a word close to a verb that
    no ssh config names and no resolver knows is a typo (exit 2, one line)."""
    cfg = tmp_path / "ssh_config"
    cfg.write_text("Host t3box\n  HostName 127.0.0.1\n  Port 1\nHost *\n  User nobody\n")
    r = run_cli("-F", str(cfg), "prbe", "t3box")
    assert r.returncode == 2
    assert r.stderr.strip() == "specdebug: unknown verb 'prbe'; did you mean 'probe'?"
    assert r.stdout == ""
    r = run_cli("lunch", "-F", str(cfg), "t3box")
    assert r.returncode == 2 and "did you mean 'launch'?" in r.stderr
    # a host the user's ssh config names is a host, however close to a verb
    cfg.write_text("Host prbe\n  HostName 127.0.0.1\n  Port 1\n")
    r = run_cli("-F", str(cfg), "prbe")
    assert r.returncode == 2 and "needs a terminal" in r.stderr and "unknown verb" not in r.stderr
    r = run_cli("-F", str(cfg), "localhost")  # resolvable: a host, not a typo of anything
    assert "unknown verb" not in r.stderr
