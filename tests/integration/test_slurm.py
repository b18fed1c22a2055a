"""The Slurm transport against a real Slurm on this machine (tests/slurm_harness.py: munged,
slurmctld and two slurmd nodes on loopback), with an allocation made by `salloc --no-shell`.

No mocked srun: the helper, streams and launches are real job steps; squeue is the witness that
a step is gone.  Skipped where slurm-wlm is not installed, unless SPECDEBUG_REQUIRE_SLURM=1
(.ci/run installs it and sets that).
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from specdebug.remote.api import ConnState
from specdebug.remote.factory import ConnectOptions, connect_host
from tests import clifork
from tests.integration.test_startup import write_profile_toml
from tests.simprofiles import sim_profile
from tests.slurm_harness import Slurm, missing_binaries, start_slurm

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Slurm:
    missing = missing_binaries()
    if missing:
        if os.environ.get("SPECDEBUG_REQUIRE_SLURM"):
            pytest.fail(f"SPECDEBUG_REQUIRE_SLURM is set but {', '.join(missing)} not installed")
        pytest.skip(f"Slurm not installed ({', '.join(missing)} missing; apt-get install slurm-wlm munge)")
    if os.geteuid() != 0:
        if os.environ.get("SPECDEBUG_REQUIRE_SLURM"):
            pytest.fail("SPECDEBUG_REQUIRE_SLURM is set but slurmd needs root here")
        pytest.skip("the Slurm harness runs slurmd, which needs root")
    slurm = start_slurm(tmp_path_factory.mktemp("slurm"), nodes=2)
    yield slurm
    slurm.stop()


@pytest.fixture(scope="module")
def job(cluster: Slurm) -> str:
    jobid = cluster.allocate(name="specdebug-alloc")
    yield jobid
    cluster.run("scancel", jobid, check=False)


@pytest.fixture
def slurm_env(cluster: Slurm, monkeypatch) -> dict[str, str]:
    """This test's clients (in-process and CLI) reach the harness's cluster."""
    monkeypatch.setenv("SLURM_CONF", str(cluster.conf))
    return cluster.env()


def cli(env: dict[str, str], cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return clifork.run(
        [sys.executable, "-m", "specdebug.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=env,
    )


def settled_steps(cluster: Slurm, job: str, want: list[str], timeout: float = 15.0) -> list[str]:
    """The job's steps once they equal `want` (or whatever they are after `timeout`): slurmctld
    drops a finished step from squeue a moment after its srun has exited."""
    deadline = time.monotonic() + timeout
    while (steps := cluster.steps(job)) != want and time.monotonic() < deadline:
        time.sleep(0.2)
    return steps


def test_the_harness_runs_two_slurmd_nodes(cluster: Slurm) -> None:
    assert cluster.node_states() == {"n1": "idle", "n2": "idle"} or set(cluster.node_states()) == {"n1", "n2"}
    assert all(p.poll() is None for p in cluster.procs.values())


async def test_the_helper_runs_as_a_step_on_the_named_node(cluster: Slurm, job: str, slurm_env) -> None:
    remote = connect_host(f"slurm:{job}:n2")
    await remote.start()
    try:
        await remote.wait_connected(60)
        assert remote.status.state is ConnState.CONNECTED
        res = await remote.run(["sh", "-c", 'echo "$SLURMD_NODENAME $SLURM_JOB_ID"; echo err >&2'])
        assert (res.exit_status, res.out.split(), res.err) == (0, ["n2", job], "err\n")
        assert b"ID=" in await remote.read_file("/etc/os-release")
        assert any(p.pid == os.getpid() for p in await remote.processes(pids=[os.getpid()]))
        helper_steps = cluster.steps(job)
        assert len(helper_steps) == 1  # the helper is one long-lived step, not one per request
        lines = []
        async with remote.stream(["sh", "-c", "echo one; echo two; exec sleep 60"]) as stream:
            async for line in stream:
                lines.append(line)
                if len(lines) == 2:
                    break
        assert lines == ["one", "two"]
        # a command loud on stderr (more than a pipe holds) still gets its stdout through
        chatty = remote.stream(["sh", "-c", "head -c 300000 /dev/zero >&2; echo done"])
        assert [line async for line in chatty] == ["done"] and chatty.exit_status == 0
        assert settled_steps(cluster, job, helper_steps) == helper_steps  # the streams' steps ended
        forward = await remote.forward_local_port(4321)  # n2 is at 127.0.0.1: the same port, no tunnel
        assert forward.local_port == 4321
    finally:
        await remote.close()
    assert settled_steps(cluster, job, []) == []


async def test_a_cancelled_helper_step_is_started_again(cluster: Slurm, job: str, slurm_env) -> None:
    remote = connect_host(f"slurm:{job}:n1")
    await remote.start()
    try:
        await remote.wait_connected(60)
        (helper,) = cluster.steps(job)
        cluster.run("scancel", helper)  # the job lives on: only the helper's step went
        deadline = time.monotonic() + 30
        while remote.generation < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        assert remote.generation == 2 and remote.status.state is ConnState.CONNECTED
        assert (await remote.run(["true"])).ok
        assert cluster.steps(job) not in ([], [helper])  # a new helper step
    finally:
        await remote.close()


async def test_a_job_that_is_not_running_fails_naming_it(cluster: Slurm, slurm_env) -> None:
    gone = cluster.allocate(nodes=1, name="specdebug-gone")
    cluster.run("scancel", gone)
    deadline = time.monotonic() + 60
    while gone in cluster.job_ids() and time.monotonic() < deadline:
        time.sleep(0.2)
    remote = connect_host(f"slurm:{gone}:n1", ConnectOptions())
    await remote.start()
    try:
        with pytest.raises(Exception, match=f"job {gone}"):
            await remote.wait_connected(30)
        assert remote.status.state is ConnState.FAILED
    finally:
        await remote.close()


async def test_an_allocation_that_ends_turns_its_host_failed(cluster: Slurm, slurm_env) -> None:
    short = cluster.allocate(nodes=1, name="specdebug-short")
    remote = connect_host(f"slurm:{short}")  # no node named: the job's first node
    await remote.start()
    try:
        await remote.wait_connected(60)
        res = await remote.run(["sh", "-c", 'echo "$SLURMD_NODENAME"'])
        assert res.out.strip() in cluster.nodes
        cluster.run("scancel", short)
        deadline = time.monotonic() + 30
        while remote.status.state is not ConnState.FAILED and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        assert remote.status.state is ConnState.FAILED
        assert f"job {short}" in (remote.status.last_error or "")
    finally:
        await remote.close()


def test_probe_lists_the_allocations_nodes_with_their_facts(job: str, slurm_env, tmp_path: Path) -> None:
    res = cli(slurm_env, tmp_path, "probe", f"slurm:{job}", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert (doc["job"], doc["state"], doc["connected"]) == (job, "RUNNING", True)
    assert [n["node"] for n in doc["nodes"]] == ["n1", "n2"]
    assert [n["host"] for n in doc["nodes"]] == [f"slurm:{job}:n1", f"slurm:{job}:n2"]
    assert all(n["connected"] and n["cpus"] and n["kernel"] for n in doc["nodes"])
    text = cli(slurm_env, tmp_path, "probe", f"slurm:{job}")
    assert text.returncode == 0 and f"job {job} RUNNING" in text.stdout and "  n2: " in text.stdout
    stray = cli(slurm_env, tmp_path, "probe", f"slurm:{job}:n9")
    assert stray.returncode == 1 and f"node n9 is not in job {job} (n1, n2)" in stray.stderr
    bad = cli(slurm_env, tmp_path, "probe", "slurm:x1", "--json")
    assert bad.returncode == 2 and "slurm:JOBID" in bad.stderr and "Traceback" not in bad.stderr


@pytest.fixture
def leftovers(box_state_dir: Path):
    """A failing test's sim is killed by its recorded group (proctrack/pgid leaves a setsid'd
    server running when its step is cancelled; the stop path is what ends it)."""
    yield
    for path in box_state_dir.glob("*.json"):
        try:
            record = json.loads(path.read_text())
            if (
                record.get("stopped_at") is None
                and record["profile"].encode() in Path(f"/proc/{record['pgid']}/cmdline").read_bytes()
            ):
                os.killpg(record["pgid"], signal.SIGKILL)
        except (OSError, ValueError, KeyError):
            pass


def test_launch_env_grep_stop_on_the_allocation(
    cluster: Slurm, job: str, slurm_env, tmp_path: Path, leftovers
) -> None:
    profile = sim_profile(tmp_path, "slurmsim")
    path = write_profile_toml(tmp_path, profile)
    host = f"slurm:{job}:n2"
    before = set(cluster.steps(job))
    launch = cli(slurm_env, tmp_path, "launch", host, "-c", str(path), "--wait", "--json")
    assert launch.returncode == 0, launch.stderr
    verdict = json.loads(launch.stdout)
    assert verdict["verdict"] == "ready", verdict
    record = json.loads((Path(os.environ["SPECDEBUG_STATE_DIR"]) / "slurmsim.json").read_text())
    step = record["step"]
    assert step.startswith(f"{job}.") and step in set(cluster.steps(job)) - before
    assert record["host"] == host and record["pgid"] == verdict["pgid"]

    status = cli(slurm_env, tmp_path, "status", host, "-c", str(path), "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["state"] == "running"

    env = cli(slurm_env, tmp_path, "env", host, "-c", str(path), "--json")
    assert env.returncode == 0, env.stderr
    report = json.loads(env.stdout)
    assert report["summary"]["workers"] >= 2 and report["summary"]["ok"]
    assert all(w["pgid"] == verdict["pgid"] for w in report["workers"])

    grep = cli(slurm_env, tmp_path, "grep", f"{host}:{profile.server.log_file}", "-e", "fired up", "--json")
    assert grep.returncode == 0, grep.stderr
    matches = [json.loads(line) for line in grep.stdout.splitlines()]
    assert matches and all("fired up" in m["line"] for m in matches)

    # the node is at 127.0.0.1: the built-in bench reaches the server's port directly
    bench = cli(slurm_env, tmp_path, "bench", host, "-c", str(path), "--requests", "4", "--json")
    assert bench.returncode == 0, bench.stderr[-2000:]
    assert json.loads(bench.stdout)["status"] == "done"

    stop = cli(slurm_env, tmp_path, "stop", host, "-c", str(path), "--json")
    assert stop.returncode == 0, stop.stderr
    result = json.loads(stop.stdout)
    assert result["stopped"] and result["step"] == step, result
    assert step not in cluster.steps(job)  # squeue -s no longer lists it
    assert (
        not Path(f"/proc/{verdict['pgid']}").exists()
        or b"slurmsim" not in Path(f"/proc/{verdict['pgid']}/cmdline").read_bytes()
    )


def test_grep_follow_reads_a_nodes_log_and_ends_its_step_on_ctrl_c(
    cluster: Slurm, job: str, slurm_env, tmp_path: Path
) -> None:
    log = tmp_path / "server.log"
    log.write_text("starting\nThe server is fired up and ready to roll!\n")
    before = cluster.steps(job)
    follow = subprocess.Popen(
        [
            # ^C at a terminal reaches a process whose SIGINT is at its default; one inherited ignored
            # (a suite started with `&` from a script: POSIX has background jobs ignore SIGINT, and
            # every worker and child inherits that) would have the CLI never see the signal below
            "env",
            "--default-signal=INT",
            sys.executable,
            "-m",
            "specdebug.cli",
            "grep",
            f"slurm:{job}:n1:{log}",
            "-e",
            "fired",
            "--follow",
            "--from-start",
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=slurm_env,
        cwd=tmp_path,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in follow.stdout], daemon=True).start()
    try:
        assert "fired up" in json.loads(lines.get(timeout=60))["line"]
        with log.open("a") as f:
            f.write("fired again\n")
        assert json.loads(lines.get(timeout=30))["line"] == "fired again"  # followed, not re-read
        follow.send_signal(signal.SIGINT)
        # the CLI's own bound: the follow's step and the helper's step each get EOF, then TERM, then
        # KILL, 5 s apart (STEP_END_GRACE_S), one after the other: at most 30 s; 45 s leaves a margin
        try:
            follow.wait(45)
        except subprocess.TimeoutExpired:
            follow.kill()
            pytest.fail(f"grep --follow still ran 45 s after ^C; stderr: {follow.communicate()[1][-2000:]}")
    finally:
        if follow.poll() is None:
            follow.kill()
    assert settled_steps(cluster, job, before) == before  # the helper's and the follow's steps ended


def test_a_launch_that_fails_on_the_node_says_why_and_leaves_no_step(
    cluster: Slurm, job: str, slurm_env, tmp_path: Path
) -> None:
    profile = sim_profile(tmp_path, "slurmbad")
    path = write_profile_toml(tmp_path, profile)
    path.write_text(
        path.read_text().replace("[server]\n", f"[server]\ncwd = {json.dumps(str(tmp_path / 'nowhere'))}\n")
    )
    before = cluster.steps(job)
    launch = cli(slurm_env, tmp_path, "launch", f"slurm:{job}:n1", "-c", str(path), "--wait", "--json")
    assert launch.returncode != 0
    assert "cannot cd to the working directory" in launch.stderr and "Traceback" not in launch.stderr
    assert settled_steps(cluster, job, before) == before


def test_a_server_that_dies_takes_its_step_with_it_and_stop_says_so(
    cluster: Slurm, job: str, slurm_env, tmp_path: Path, leftovers
) -> None:
    profile = sim_profile(tmp_path, "slurmdies")
    path = write_profile_toml(tmp_path, profile)
    host = f"slurm:{job}:n1"
    launch = cli(slurm_env, tmp_path, "launch", host, "-c", str(path), "--wait", "--json")
    assert launch.returncode == 0, launch.stderr
    verdict = json.loads(launch.stdout)
    step = json.loads((Path(os.environ["SPECDEBUG_STATE_DIR"]) / "slurmdies.json").read_text())["step"]
    assert step in cluster.steps(job)
    os.killpg(verdict["pgid"], signal.SIGKILL)  # the server dies (OOM killer, a crash)
    deadline = time.monotonic() + 60
    while step in cluster.steps(job) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert step not in cluster.steps(job)  # the holding step ended by itself with its server
    stop = cli(slurm_env, tmp_path, "stop", host, "-c", str(path), "--json")
    assert stop.returncode == 0, stop.stderr
    result = json.loads(stop.stdout)
    assert result["stopped"] and not result["was_running"] and result["step"] == step, result


async def test_the_hosts_pane_shows_a_slurm_node_connected(cluster: Slurm, job: str, slurm_env) -> None:
    from textual.widgets import DataTable

    from specdebug.tui.app import SpecdebugApp
    from specdebug.tui.context import AppContext
    from specdebug.tui.panes.hosts import HostsPane

    host = f"slurm:{job}:n2"
    before = cluster.steps(job)
    app = SpecdebugApp(AppContext(remotes={host: connect_host(host)}, selected=host))
    async with app.run_test(size=(140, 40)) as pilot:
        pane = app.query_one(HostsPane)
        from specdebug.tui.panes.hosts import HOST_COLUMNS

        keys = [key for _, key in HOST_COLUMNS]
        table = app.query_one("#hosts-table", DataTable)

        def cells() -> dict[str, str]:
            return dict(zip(keys, [str(c) for c in table.get_row(host)], strict=False))

        # the table takes the hosts' news in batches (hosts.BATCH_S): wait for what it shows
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (
            host in pane.infos and cells()["state"].startswith("connected") and cells()["hostname"]
        ):
            await pilot.pause(0.1)
        cell = cells()
        assert cell["state"].startswith("connected") and cell["hostname"] == pane.infos[host].hostname
    # leaving the app ended the helper's step (a step an earlier test left may end meanwhile: in the suite
    # '1.25' was in `before` and gone after, while no step of this app remained)
    after = settled_steps(cluster, job, before)
    assert not set(after) - set(before), (before, after)


def test_a_two_node_deployment_on_the_allocation(
    cluster: Slurm, job: str, slurm_env, tmp_path: Path, box_state_dir: Path
) -> None:
    """`[deployment]` over the allocation's two nodes (slurm:JOB:n1 leads): a job step per node, READY
    as one, both nodes' workers in env, stop ends every step.  No leader_address: the default is the
    leader node's NodeAddr (127.0.0.1 here), not its Slurm name `n1` (issue 38)."""
    from tests.cluster_harness import kill_recorded
    from tests.deployprofiles import dep_profile

    nodes = (f"slurm:{job}:n1", f"slurm:{job}:n2")
    prof = dep_profile(tmp_path, "slurm", env={"NCCL_DEBUG": "INFO"}, nodes=nodes)
    before = set(cluster.steps(job))
    try:
        launch = cli(slurm_env, tmp_path, "launch", "-c", str(prof), "--wait", "--json")
        assert launch.returncode == 0, launch.stderr
        data = json.loads(launch.stdout)
        assert data["verdict"] == "ready" and [n["host"] for n in data["nodes"]] == list(nodes), data
        steps = set(cluster.steps(job)) - before
        assert len(steps) >= 2, steps  # one launch step per node (the helpers' steps besides)
        env = json.loads(cli(slurm_env, tmp_path, "env", "-c", str(prof), "--json").stdout)
        assert all(n["workers"] for n in env["nodes"]) and env["transport"]["verdict"] == "ib-gdrdma"
        stop = cli(slurm_env, tmp_path, "stop", "-c", str(prof), "--json")
        result = json.loads(stop.stdout)
        assert stop.returncode == 0 and result["stopped"], stop.stdout
        launched = {r["step"] for r in result["nodes"]}
        assert None not in launched and not launched & set(settled_steps(cluster, job, sorted(before)))
    finally:
        kill_recorded(box_state_dir, "dep-")


def _gone(pgid: int, timeout: float) -> bool:
    from tests.deployprofiles import group_alive

    deadline = time.monotonic() + timeout
    while group_alive(pgid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


@pytest.mark.parametrize("cancelled", ["step", "job"])
def test_a_server_ends_with_its_cancelled_step_or_job(
    cluster: Slurm, slurm_env, tmp_path: Path, leftovers, cancelled: str
) -> None:
    """proctrack/pgid signals the step's own group; the server, setsid'd by the launch, escaped it and
    ran on after scancel (issue 38: 18-43 s, until killed).  The step's holder passes the signal on."""
    jobid = cluster.allocate(nodes=1, name=f"specdebug-ends-{cancelled}")
    try:
        profile = sim_profile(tmp_path, f"slurmends{cancelled}")
        path = write_profile_toml(tmp_path, profile)
        launch = cli(slurm_env, tmp_path, "launch", f"slurm:{jobid}", "-c", str(path), "--wait", "--json")
        assert launch.returncode == 0, launch.stderr
        pgid = json.loads(launch.stdout)["pgid"]
        record = json.loads((Path(os.environ["SPECDEBUG_STATE_DIR"]) / f"{profile.name}.json").read_text())
        cluster.run("scancel", record["step"] if cancelled == "step" else jobid)
        assert _gone(pgid, 15), f"the server's group {pgid} still runs 15 s after scancel of the {cancelled}"
    finally:
        cluster.run("scancel", jobid, check=False)


def test_the_default_leader_address_is_the_slurm_nodes_address(cluster: Slurm, job: str, slurm_env) -> None:
    """Other nodes reach the leader at its NodeAddr (scontrol show node), not at its Slurm name (`n1`,
    which need not resolve) nor at the job id (`slurm:JOB` names the job's first node)."""
    from specdebug.core.deployment import default_leader_address

    assert default_leader_address(f"slurm:{job}:n1") == "127.0.0.1"
    assert default_leader_address(f"slurm:{job}") == "127.0.0.1"
    assert default_leader_address("slurm:999999:n1") == "127.0.0.1"  # the node is known, the job is not


def test_another_users_job_is_refused_at_once_with_slurms_words(tmp_path: Path) -> None:
    """A job step in another user's job is refused by Slurm (`Access/permission denied`): the connect
    fails at once with those words, not after retrying for the whole connect timeout (issue 38).
    The client runs as `nobody` against a root-owned allocation, on a cluster of its own in a folder
    every user may traverse (the module's lies under pytest's private temp folder)."""
    import shutil
    import tempfile

    if missing_binaries() or os.geteuid() != 0 or shutil.which("runuser") is None:
        pytest.skip("needs Slurm, root and runuser")
    work = Path(tempfile.mkdtemp(prefix="specdebug-slurm-perm-"))
    try:
        own = start_slurm(work / "slurm", nodes=1)
        os.chmod(work, 0o755)
        try:
            jobid = own.allocate(nodes=1, name="specdebug-root-job")
            home = work / "home"
            home.mkdir(mode=0o777)
            home.chmod(0o777)
            # this checkout and its venv's packages, run by an interpreter `nobody` may execute (the
            # venv's may live under root's private home)
            import sysconfig

            root = Path(__file__).resolve().parents[2]
            env = {"PATH": os.environ["PATH"], "HOME": str(home), "SLURM_CONF": str(own.conf),
                   "SPECDEBUG_NO_AGENT": "1", "PYTHONDONTWRITEBYTECODE": "1",
                   "PYTHONPATH": f"{root}:{sysconfig.get_paths()['purelib']}"}  # fmt: skip
            as_nobody = ["runuser", "-u", "nobody", "--"]
            python = next(
                (p for p in (sys.executable, "/usr/bin/python3", "/usr/local/bin/python3")
                 if subprocess.run([*as_nobody, p, "-c", "import specdebug.cli"], env=env, cwd=home,
                                   capture_output=True, timeout=60).returncode == 0),
                None,
            )  # fmt: skip
            if python is None:
                pytest.skip("no Python that user nobody may run imports this checkout")
            t0 = time.monotonic()
            run = subprocess.run(
                [*as_nobody, python, "-m", "specdebug.cli", "probe", f"slurm:{jobid}:n1", "--connect-timeout", "600"],
                capture_output=True, text=True, timeout=90, env=env, cwd=home,
            )  # fmt: skip
            took = time.monotonic() - t0
            assert run.returncode == 1, (run.stdout, run.stderr)
            assert f"Unable to create step for job {jobid}: Access/permission denied" in run.stderr, (
                run.stderr
            )
            assert "Traceback" not in run.stderr
            print(
                f"refused after {took:.1f} s (a retry would run to the 600 s connect timeout, past the run's 90 s)"
            )
        finally:
            own.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_a_slurm_error_is_printed_once(cluster: Slurm, job: str, slurm_env, tmp_path: Path) -> None:
    """`probe slurm:JOB` on a job that is gone or never was says Slurm's error once (issue 41: it was in
    the job line on stdout and again on stderr, and a cancelled job's once more per node)."""
    gone = cluster.allocate(nodes=1, name="specdebug-once")
    cluster.run("scancel", gone)
    deadline = time.monotonic() + 60
    while gone in cluster.job_ids() and time.monotonic() < deadline:
        time.sleep(0.2)
    cases = {
        f"slurm:{gone}": f"job {gone} is CANCELLED, not running",
        "slurm:999999": "Invalid job id specified",
    }
    for host, words in cases.items():
        res = cli(slurm_env, tmp_path, "probe", host)
        both = res.stdout + res.stderr
        assert res.returncode == 1, both
        assert both.count(words) == 1, both
        assert "Traceback" not in both
    cancelled = cli(slurm_env, tmp_path, "probe", f"slurm:{gone}")
    # the job's one node is whichever Slurm picked (n1 or n2): each node it held is listed once
    assert f"job {gone} CANCELLED" in cancelled.stdout
    assert len(re.findall(r"^  n[12]: not probed$", cancelled.stdout, re.M)) == 1, cancelled.stdout
    as_json = cli(slurm_env, tmp_path, "probe", f"slurm:{gone}", "--json")  # the JSON keeps the why
    assert json.loads(as_json.stdout)["error"] == cases[f"slurm:{gone}"]
    assert as_json.stderr.count(cases[f"slurm:{gone}"]) == 1
