"""The headless `launch` and `restart` ask who else holds the GPUs before they start or stop anything
(issue 41: a launch while a bisection's trial held the GPUs cost the bisection a data point).  Over
the loopback sshd, with servers that hold nothing but their CUDA_VISIBLE_DEVICES as recorded:

* a launch onto GPUs another running server of this user names is refused (exit 1), naming its
  profile, PID, GPUs and how to stop it, and starts nothing; `--json` gives `neighbours`;
  `--force` launches all the same and says so; a profile on other GPUs launches unasked;
* the refusal's lines are the TUI Startup pane's warning for the same target, word for word;
* `restart` refuses the same way before it stops its own server (which keeps running);
* a running bisection (the box's bisection lock) refuses a launch on any GPUs.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from textual.app import App, ComposeResult

from specdebug.core.control.events import ServerState
from specdebug.core.control.records import forget_record, group_members, load_record
from specdebug.core.profiles import load_profile
from specdebug.tui.context import AppContext
from specdebug.tui.panes.startup import StartupPane
from tests import clifork
from tests.security.boxkit import unique, write_profile
from tests.sshd_harness import free_port
from tests.tui.pilotwait import until

pytestmark = pytest.mark.slow


def gpu_profile(folder: Path, name: str, gpus: str) -> Path:
    """A server that holds nothing but its recorded CUDA_VISIBLE_DEVICES (cheap on a shared machine)."""
    port = free_port()
    return write_profile(
        folder / f"{name}.toml",
        name,
        {
            "kind": "custom",
            "argv": ["sh", "-c", "sleep 600; true", name, "--port", str(port)],
            "port": port,
            "log_file": str(folder / f"{name}.log"),
            "env": {"CUDA_VISIBLE_DEVICES": gpus},
        },
    )


def cli(sshd, *args: str) -> subprocess.CompletedProcess:
    """`specdebug VERB -F CONFIG gpubox ARGS...`, as from another terminal."""
    cmd = [sys.executable, "-m", "specdebug.cli", args[0], "-F", str(sshd.config_path), "gpubox", *args[1:]]
    return clifork.run(cmd, capture_output=True, text=True, timeout=180)


async def run_cli(sshd, *args: str) -> subprocess.CompletedProcess:
    return await asyncio.to_thread(cli, sshd, *args)


async def cleanup(remote, names: list[str]) -> None:
    for name in names:
        record = await load_record(remote, name)
        if record is not None and group_members(await remote.processes(), record):
            await remote.run(["kill", "-KILL", "--", f"-{record.pgid}"])
        await forget_record(remote, name)


class PaneApp(App):
    def __init__(self, ctx: AppContext) -> None:
        super().__init__()
        self.ctx = ctx

    def compose(self) -> ComposeResult:
        yield StartupPane(self.ctx)


async def pane_warning(remote, profile_path: Path) -> list[str]:
    """The Startup pane's warning for the same profile on the same box (its first press of `l`)."""
    ctx = AppContext(remotes={remote.name: remote}, selected=remote.name, profile=load_profile(profile_path))
    app = PaneApp(ctx)
    async with app.run_test(size=(130, 40)) as pilot:
        pane = app.query_one(StartupPane)
        assert await until(pilot, lambda: pane.state is ServerState.IDLE, 30)
        pane.focus()
        await pilot.press("l")
        assert await until(pilot, lambda: "again within" in pane.launch_warning, 60), pane.message
        return pane.launch_warning.splitlines()[:-1]  # the last line says how to launch anyway


async def test_launch_and_restart_refuse_gpus_another_server_holds(sshd, remote, tmp_path: Path) -> None:
    names = [unique("holder"), unique("second"), unique("apart")]
    holder, second, apart = (
        gpu_profile(tmp_path, n, g) for n, g in zip(names, ["0,1", "1,2", "2,3"], strict=True)
    )
    try:
        first = await run_cli(sshd, "launch", "-c", str(holder), "--json")
        assert first.returncode == 0, first.stderr[-2000:]
        held = json.loads(first.stdout)
        assert held["neighbours"] == []  # asked, and nobody held its GPUs
        pid, pgid = held["pid"], held["pgid"]

        refused = await run_cli(sshd, "launch", "-c", str(second))
        assert refused.returncode == 1, refused.stdout + refused.stderr
        said = refused.stderr
        assert f"launch: {names[0]} (PID {pid}, port {held['port']}, launched by specdebug launch" in said, (
            said
        )
        assert "holds GPU 1 (CUDA_VISIBLE_DEVICES=0,1; this launch: 1,2)" in said, said
        assert f"`specdebug stop gpubox -c PROFILE` (PROFILE: {names[0]}'s file)" in said, said
        assert f"`kill -TERM -- -{pgid}` on gpubox" in said, said
        assert "launch: refused:" in said and "--force" in said, said
        assert await load_record(remote, names[1]) is None  # nothing started

        # the TUI's warning for the same target is the verb's, line for line
        warned = await pane_warning(remote, second)
        verb_lines = [
            line.removeprefix("specdebug: launch: ") for line in said.splitlines() if "runs on gpubox" in line
        ]
        assert warned == verb_lines, (warned, verb_lines)

        as_json = await run_cli(sshd, "launch", "-c", str(second), "--json")
        assert as_json.returncode == 1
        got = json.loads(as_json.stdout)
        assert got["verdict"] == "refused" and got["pid"] is None, got
        (n,) = got["neighbours"]
        assert (n["kind"], n["name"], n["pid"], n["pgid"]) == ("server", names[0], pid, pgid), n
        assert (n["gpus"], n["shared_gpus"], n["host"]) == (["0", "1"], ["1"], "gpubox"), n
        assert "kill -TERM" in n["stop"] and n["sentence"] in said

        alone = await run_cli(sshd, "launch", "-c", str(apart), "--json")  # GPUs 2,3: nobody's
        assert alone.returncode == 0, alone.stderr[-2000:]
        assert json.loads(alone.stdout)["neighbours"] == [] and "runs on gpubox" not in alone.stderr

        forced = await run_cli(sshd, "launch", "-c", str(second), "--force", "--json")
        assert forced.returncode == 0, forced.stderr[-2000:]
        assert "goes ahead anyway (--force)" in forced.stderr
        forced_json = json.loads(forced.stdout)
        assert forced_json["pid"] != pid
        assert {x["name"] for x in forced_json["neighbours"]} == {names[0], names[2]}  # 1,2 meets both

        again = await run_cli(sshd, "restart", "-c", str(holder))
        assert again.returncode == 1, again.stdout + again.stderr
        assert f"restart: {names[1]} (PID {forced_json['pid']}" in again.stderr, again.stderr
        assert "restart: refused:" in again.stderr and "nothing was started or stopped" in again.stderr
        record = await load_record(remote, names[0])
        assert record is not None and record.pid == pid and record.stopped_at is None
        assert group_members(await remote.processes(), record)  # the holder still runs
    finally:
        await cleanup(remote, names)


async def test_launch_is_refused_while_a_bisection_holds_the_box(sshd, remote, tmp_path: Path) -> None:
    from specdebug.core.bisect.boxlock import hold_box

    name = unique("beside")
    profile = gpu_profile(tmp_path, name, "3")
    warnings: list[str] = []
    try:
        async with hold_box(remote, "gpubox", "b1s3c7", "good-prof", "bad-prof", warnings):
            assert not warnings, warnings
            refused = await run_cli(sshd, "launch", "-c", str(profile), "--json")
            assert refused.returncode == 1, refused.stdout + refused.stderr
            assert "another bisection runs on gpubox" in refused.stderr, refused.stderr
            assert "good-prof vs bad-prof" in refused.stderr
            got = json.loads(refused.stdout)
            (n,) = got["neighbours"]
            assert n["kind"] == "bisection" and n["bisection"]["bisect"] == "b1s3c7", n
            assert await load_record(remote, name) is None
    finally:
        await cleanup(remote, [name])
