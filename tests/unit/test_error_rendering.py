"""The error root is caught and rendered once by the command line (issue 38): a SpecdebugError raised
inside a verb, sync or async, decorated or not, is one `specdebug: MESSAGE` line, a
`specdebug: hint: HINT` line when it has a hint, and its own exit code; never a traceback.
Before, cli.run_verb caught only VerbExit and the journal's OSError, and the run_verb decorator only
RemoteError: anything else of the root ended in a traceback, and no hint was ever shown."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

from specdebug import cli
from specdebug.core.control.actions import LaunchRefused
from specdebug.core.profiles import ProfileError, load_profile
from specdebug.errors import SpecdebugError
from specdebug.verbs.common import run_verb
from tests import clifork

REFUSED = "not launching p: port 30000 is in use by PID 7 (python -m sglang.launch_server)"
HINT = "to use another port, change `--port 30000` in [server] argv"


def verb_raising(monkeypatch: pytest.MonkeyPatch, func) -> None:
    parser = argparse.ArgumentParser(prog="specdebug launch")
    parser.set_defaults(func=func)
    from specdebug.verbs import table

    monkeypatch.setattr(table, "verb_parser", lambda name: parser)  # cli imports it when a verb runs
    monkeypatch.setenv("SPECDEBUG_NO_AGENT", "1")


def stderr_lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    got = capsys.readouterr()
    assert got.out == ""
    return got.err.splitlines()


def test_a_sync_verb_raising_the_root_gives_its_line_its_hint_and_its_code(monkeypatch, capsys) -> None:
    def launch(args: argparse.Namespace) -> int:
        raise LaunchRefused(REFUSED, hint=HINT)

    verb_raising(monkeypatch, launch)
    assert cli.run_verb("launch", []) == 1
    assert stderr_lines(capsys) == [f"specdebug: {REFUSED}", f"specdebug: hint: {HINT}"]


def test_an_async_verb_and_a_usage_error_exit_2(monkeypatch, capsys, tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("name = 'x'\n[server]\nargv = []\n")

    async def bench(args: argparse.Namespace) -> int:
        load_profile(bad)  # raises ProfileError: a config error, exit 2, with the command that lists it all
        return 0

    verb_raising(monkeypatch, bench)
    assert cli.run_verb("bench", []) == 2
    message, hint = stderr_lines(capsys)
    assert message.startswith("specdebug: ") and "bad.toml" in message
    assert (
        hint
        == f"specdebug: hint: specdebug profile check {bad} lists every problem; specdebug profile schema shows the fields"
    )


def test_no_hint_no_hint_line_and_the_decorator_renders_the_same(capsys) -> None:
    @run_verb
    def status(args: argparse.Namespace) -> int:
        raise SpecdebugError("p is not running on gpubox")

    assert status(argparse.Namespace()) == 1
    assert stderr_lines(capsys) == ["specdebug: p is not running on gpubox"]

    @run_verb
    async def metrics(args: argparse.Namespace) -> int:
        raise ProfileError("no such field", file="/x/p.toml", line=3, field="server.prot")

    import asyncio

    assert asyncio.run(metrics(argparse.Namespace())) == 2
    assert stderr_lines(capsys) == [
        "specdebug: /x/p.toml:3: server.prot: no such field",
        "specdebug: hint: specdebug profile check /x/p.toml lists every problem; specdebug profile schema shows the fields",
    ]


def test_the_real_command_line_shows_the_profile_hint_without_a_traceback(tmp_path: Path) -> None:
    """The whole path, in a process of its own: `launch -c BAD` is one line, its hint, exit 2."""
    bad = tmp_path / "bad.toml"
    bad.write_text("name = 'x'\n[server]\nargv = ['python', '-m', 'sglang.launch_server']\nport = 'high'\n")
    r = clifork.run(
        [sys.executable, "-m", "specdebug.cli", "launch", "127.0.0.1", "-c", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith("specdebug: launch: ") and "bad.toml" in lines[0], lines
    assert (
        lines[1]
        == f"specdebug: hint: specdebug profile check {bad} lists every problem; specdebug profile schema shows the fields"
    )


async def test_a_taken_port_is_refused_with_the_port_to_change(tmp_path: Path) -> None:
    """The hint is set where the user can act: the core's refusal names what to change (the launch
    verb printed it on its own; the TUI's Startup pane never did)."""
    import socket

    from specdebug.core.control.launch import check_can_launch
    from tests.unit.test_log_follow_local import LocalRemote

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        path = tmp_path / "p.toml"
        path.write_text(
            f'name = "p"\n[server]\nargv = ["python3", "-m", "sglang.launch_server", "--port", "{port}"]\n'
        )
        remote = LocalRemote()
        try:
            with pytest.raises(LaunchRefused) as refused:
                await check_can_launch(remote, load_profile(path))
        finally:
            await remote.close()
    assert f"port {port} is in use" in str(refused.value)
    hint = refused.value.hint or ""
    assert hint.startswith(
        f"to use another port, change `--port {port}` in [server] argv and `port = {port}` in {path}"
    ), hint
    assert hint.endswith("(or in a copy that `extends` it)"), hint
