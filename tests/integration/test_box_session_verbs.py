"""`--session box:...` for the headless verbs, over the real sshd and the simulated box.

The verbs mean what the TUI means: the journal kept on the box, written and read over the verb's own
connection (history/report/mark take --host HOST for it). A bench result lands there and shows in
`history`, a launch verdict is journaled there, no local folder literally named `box:...` ever
appears, and a bad name is one clear line and exit 2 before any connection.

The box is this machine, so the tests use `box:/abs/dir` under their tmp_path: `box:NAME` would be
the box user's real home (~/.specdebug/sessions/NAME), which tests never write.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from specdebug.core.boxjournal import BoxJournal
from specdebug.core.journal import resolve_session
from specdebug.core.report import history
from tests import clifork
from tests.integration.test_bench_sim import start_sim, write_profile
from tests.integration.test_startup import kill_leftovers, sim_profile, write_profile_toml  # noqa: F401

pytestmark = pytest.mark.slow


def specdebug(cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """The CLI run from `cwd` (a folder of its own: a stray local `box:...` folder would show there)."""
    cwd.mkdir(exist_ok=True)
    return clifork.run(
        [sys.executable, "-m", "specdebug.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )


def no_box_folders(*where: Path) -> None:
    for folder in where:
        assert not [p.name for p in folder.iterdir() if p.name.startswith("box:")], folder


async def test_bench_result_lands_in_the_box_journal_and_history_reads_it(
    sshd, remote, tmp_path: Path
) -> None:
    sim, log = start_sim(tmp_path, "baseline")
    shared = tmp_path / "on-the-box"  # box:/abs/dir: the box is this machine
    cwd = tmp_path / "cwd"
    spec = f"box:{shared}"
    ssh = ["-F", str(sshd.config_path)]
    with sim:
        profile = write_profile(tmp_path, "baseline", sim.port, log)
        run = specdebug(
            cwd, "bench", *ssh, sshd.alias, "-c", str(profile), "--requests", "1", "--output-len", "16",
            "--session", spec, "--json",
        )  # fmt: skip
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    assert data["session"] == spec
    lines = (shared / "events.jsonl").read_text().splitlines()
    assert [json.loads(line)["kind"] for line in lines].count("bench_result") == 1

    # a BoxJournal opened separately (as another instance's TUI) sees the same result
    other = BoxJournal(remote, str(shared))
    await other.refresh()
    (entry,) = history(other.records())
    assert entry.result.fingerprint == data["fingerprint"] and entry.result.profile == "baseline"

    hist = specdebug(cwd, "history", "--session", spec, "--host", sshd.alias, *ssh, "--json")
    assert hist.returncode == 0, hist.stderr
    got = json.loads(hist.stdout)
    assert got["session"] == spec
    assert [r["fingerprint"] for r in got["results"]] == [data["fingerprint"]]
    text = specdebug(cwd, "history", "--session", spec, "--host", sshd.alias, *ssh)
    assert text.returncode == 0 and f"session {spec}: 1 result(s)" in text.stdout, text.stderr

    mark = specdebug(cwd, "mark", "NCCL_PROTO=LL exported", "--session", spec, "--host", sshd.alias, *ssh)
    assert mark.returncode == 0, mark.stderr
    report = specdebug(cwd, "report", "--session", spec, "--host", sshd.alias, *ssh)
    assert report.returncode == 0, report.stderr
    assert "NCCL_PROTO=LL exported" in report.stdout and "baseline" in report.stdout

    # bisect reads the box journal over its own connection: no unfinished bisection there to resume
    resume = specdebug(cwd, "bisect", *ssh, sshd.alias, "--resume", "--session", spec)
    assert resume.returncode == 2 and f"no unfinished bisection in {spec}" in resume.stderr, resume.stderr
    no_box_folders(cwd, tmp_path)


async def test_launch_and_stop_verdicts_are_journaled_on_the_box(sshd, tmp_path: Path) -> None:
    profile = sim_profile(tmp_path, "boxsess")
    path = write_profile_toml(tmp_path, profile)
    shared = tmp_path / "on-the-box"
    cwd = tmp_path / "cwd"
    spec = f"box:{shared}"
    ssh = ["-F", str(sshd.config_path), sshd.alias, "-c", str(path), "--session", spec]
    launch = specdebug(cwd, "launch", *ssh, "--wait", "--json")
    assert launch.returncode == 0, launch.stderr
    assert json.loads(launch.stdout)["verdict"] == "ready"
    stop = specdebug(cwd, "stop", *ssh, "--json")
    assert stop.returncode == 0, stop.stderr
    events = [json.loads(line) for line in (shared / "events.jsonl").read_text().splitlines()]
    assert [e["kind"] for e in events] == ["launch", "verdict", "stop"]
    assert events[1]["verdict"] == "ready" and all(e.get("eid") and e.get("by") for e in events)
    no_box_folders(cwd, tmp_path)


@pytest.mark.parametrize("bad", ["box:../x", "box:", "box:a/b", "box:/tmp/../etc"])
def test_bad_box_session_is_exit_2_before_connecting(bad: str, tmp_path: Path) -> None:
    profile = sim_profile(tmp_path, "badname")
    path = write_profile_toml(tmp_path, profile)
    cwd = tmp_path / "cwd"
    # host 127.0.0.1:9 would refuse: the name is judged before any connection is tried
    for argv in (
        ["bench", "127.0.0.1:9", "-c", str(path), "--session", bad],
        ["launch", "127.0.0.1:9", "-c", str(path), "--session", bad],
        ["stop", "127.0.0.1:9", "-c", str(path), "--session", bad],
        ["restart", "127.0.0.1:9", "-c", str(path), "--session", bad],
        ["attach", "127.0.0.1:9", "-c", str(path), "--session", bad],
        ["bisect", "127.0.0.1:9", "--good", str(path), "--bad", str(path), "--session", bad],
        ["history", "--session", bad, "--host", "127.0.0.1:9"],
        ["report", "--session", bad],
        ["mark", "x", "--session", bad],
        ["bench", "--parse", str(path), "--session", bad],
    ):
        res = specdebug(cwd, *argv, timeout=60)
        assert res.returncode == 2, (argv, res.stdout, res.stderr)
        assert "session name" in res.stderr or "not a plain absolute folder" in res.stderr, res.stderr
        assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    no_box_folders(cwd, tmp_path)


def test_box_session_without_a_host_says_add_host(tmp_path: Path) -> None:
    cwd = tmp_path / "cwd"
    for argv in (["history", "--session", "box:team"], ["report", "--session", "box:team"]):
        res = specdebug(cwd, *argv, timeout=60)
        assert res.returncode == 2 and "--host HOST" in res.stderr, res.stderr
    # a local folder with --host: that host's results in it (issue 41); this one does not exist
    res = specdebug(cwd, "history", "--session", str(tmp_path / "local"), "--host", "gpubox", timeout=60)
    assert res.returncode == 2 and "no session folder at" in res.stderr, res.stderr
    no_box_folders(cwd, tmp_path)


def test_a_local_resolution_never_takes_box_as_a_folder(monkeypatch, tmp_path: Path) -> None:
    """The one resolver refuses `box:...` (from --session or $SPECDEBUG_SESSION) instead of a local folder."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="kept on the box"):
        resolve_session("box:team", for_writing=True)
    monkeypatch.setenv("SPECDEBUG_SESSION", "box:team")
    with pytest.raises(ValueError, match="kept on the box"):
        resolve_session(None, for_writing=True)
    no_box_folders(tmp_path)
