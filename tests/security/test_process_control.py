"""Process control touches only what specdebug can prove it launched or attached (real sshd).

`attach --pid 1`, edited state files (group 0, group 1, a group we started ourselves, sshd's group,
this login's own session, another owner, a writable file, a symlink, a FIFO), a reused PGID, a
leaderless group and PID 1 of a PID namespace: each is refused or reported "not running" with the
reason, and nothing that is not the server is ever signalled.  The box is this machine, so the
test checks /proc of the processes it started itself (never scans for others).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from specdebug.box.procctl import judge
from specdebug.core.control import actions as server_control
from specdebug.core.control.actions import LaunchRefused
from specdebug.core.control.launch import launch
from specdebug.core.control.records import box_call, find_port_holder, load_record
from specdebug.core.profiles import Profile
from tests import clifork
from tests.boxes import ssh_box
from tests.sshd_harness import SSHD, free_port, start_sshd

pytestmark = pytest.mark.slow


# -- the pure judgement (box/procctl.py judge) -----------------------------------------------------


def p(
    pid: int, pgid: int, start: int = 100, uid: int = 1000, comm: str = "python3", state: str = "S"
) -> dict:
    return {
        "pid": pid,
        "ppid": 1,
        "pgid": pgid,
        "sid": pgid,
        "state": state,
        "start": start,
        "comm": comm,
        "uid": uid,
    }


def verdict(procs: list[dict], own=(), environ=lambda pid, entry: False, **req) -> dict:
    table = {q["pid"]: q for q in procs}
    req = {"pgid": 50, "start_ticks": 100, "pid": 50, "pid_start_ticks": 100, **req}
    return judge(
        req, table, 1000, own, environ=environ, cmdlines=lambda pid: [], environ_entries=lambda pid: []
    )


def test_judge_rules() -> None:
    assert verdict([p(50, 50), p(51, 50, 120)])["state"] == "running"
    assert verdict([p(50, 50, start=999)])["state"] == "mismatch"  # PGID reused
    assert verdict([])["state"] == "gone"
    assert verdict([p(50, 50, state="Z"), p(51, 50)])["state"] == "running"  # a zombie leader still proves
    assert verdict([p(1, 1)], pgid=1, pid=1)["state"] == "refused"
    assert verdict([p(2, 0)], pgid=0, pid=0)["state"] == "refused"
    assert verdict([p(50, 50), p(51, 50, uid=0)])["state"] == "refused"  # another user's process
    assert verdict([p(50, 50, comm="sshd")])["state"] == "refused"
    assert verdict([p(50, 50)], own={50})["state"] == "refused"  # this login's own session
    assert verdict([p(50, 50)], start_ticks=None)["state"] == "unproven"
    # leader gone: the recorded (listener) PID proves the group; else this launch's id; else nothing
    assert verdict([p(51, 50, 120)], pid=51, pid_start_ticks=120)["state"] == "running"
    assert verdict([p(51, 50, 120)], pid=51, pid_start_ticks=121)["state"] == "unproven"
    token = verdict([p(51, 50, 120)], launch_id="abc", environ=lambda pid, e: e == "SPECDEBUG_LAUNCH_ID=abc")
    assert token["state"] == "running"
    assert verdict([p(51, 50, 120)], launch_id="abc")["state"] == "unproven"


# -- helpers over the real sshd ------------------------------------------------------------------------


def sleeper(tmp_path: Path, name: str) -> Profile:
    return Profile.model_validate(
        {
            "name": name,
            "server": {
                "argv": ["sleep", "300"],
                "log_file": str(tmp_path / f"{name}.log"),
                "port": free_port(),
                "kind": "custom",
            },
        }
    )


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def start_ticks(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rfind(")") + 2 :].split()[19])


def kill_group(pgid: int, start: int | None = None) -> None:
    """Cleanup: SIGKILL a group this test started, unless its PID now names another process."""
    try:
        if start is not None and Path(f"/proc/{pgid}").exists() and start_ticks(pgid) != start:
            return
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass


async def wait_until(predicate, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.05)


@pytest.fixture
def victim():
    """A process group we started ourselves that is not the server: it must survive every test."""
    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
    yield proc
    kill_group(proc.pid)
    proc.wait(10)


@pytest.fixture
async def server(remote, tmp_path):
    """A launched sleeper (its group is killed at the end by this test, whatever happened)."""
    profile = sleeper(tmp_path, f"pctl-{uuid.uuid4().hex[:6]}")
    record = await launch(remote, profile)
    yield profile, record
    kill_group(record.pgid, record.start_ticks)


def specdebug(sshd, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "specdebug.cli", args[0], "-F", str(sshd.config_path), sshd.alias, *args[1:]]
    return clifork.run(cmd, capture_output=True, text=True, timeout=120)


def write_toml(tmp_path: Path, profile: Profile) -> Path:
    s = profile.server
    path = tmp_path / f"{profile.name}.toml"
    path.write_text(
        f'name = {json.dumps(profile.name)}\n[server]\nargv = {json.dumps(s.argv)}\nkind = "custom"\n'
        f"log_file = {json.dumps(s.log_file)}\nport = {s.port}\n"
    )
    return path


# -- attach ------------------------------------------------------------------------------------------


async def test_attach_pid_1_and_own_session_refused(sshd, remote, tmp_path, box_state_dir) -> None:
    profile = sleeper(tmp_path, f"att1-{uuid.uuid4().hex[:6]}")
    r = specdebug(sshd, "attach", "-c", str(write_toml(tmp_path, profile)), "--pid", "1", "--timeout", "1")
    assert r.returncode == 1
    assert "PID 1 is init" in r.stderr and "Traceback" not in r.stderr
    assert not (box_state_dir / f"{profile.name}.json").exists()  # nothing recorded, so nothing to stop
    # this login's own helper and sshd are never adopted
    with pytest.raises(LaunchRefused, match="own session|holds sshd"):
        await server_control.attach(remote, profile, pid=remote.helper_info["pid"])
    with pytest.raises(LaunchRefused, match="own session|holds sshd"):
        await server_control.attach(remote, profile, pid=sshd.proc.pid)
    assert await load_record(remote, profile.name) is None


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv")
async def test_attach_other_users_process_refused(remote, tmp_path) -> None:
    other = subprocess.Popen(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sleep", "300"],
        start_new_session=True,
    )
    try:
        await wait_until(lambda: Path(f"/proc/{other.pid}").stat().st_uid == 65534)
        with pytest.raises(LaunchRefused, match="another user"):
            await server_control.attach(remote, sleeper(tmp_path, "otheruser"), pid=other.pid)
        assert alive(other.pid)
    finally:
        kill_group(other.pid)
        other.wait(10)


async def test_attach_by_port_listener_not_leader(remote, tmp_path) -> None:
    """sh leads the group, python listens: the record holds both identities, and stop still works
    once the leader is gone (the listener proves the group); a group nothing proves is left alone."""
    port = free_port()
    listen = f"{sys.executable} -m http.server --bind 127.0.0.1 {port}"
    group = subprocess.Popen(
        ["sh", "-c", f"{listen} >/dev/null 2>&1 & sleep 300 & wait"], start_new_session=True
    )
    group_start = start_ticks(group.pid)
    try:
        profile = sleeper(tmp_path, f"attport-{uuid.uuid4().hex[:6]}")
        profile = profile.model_copy(update={"server": profile.server.model_copy(update={"port": port})})
        holder = None
        deadline = time.monotonic() + 30
        while holder is None or not holder.listening:
            assert time.monotonic() < deadline, "the listener never came up"
            await asyncio.sleep(0.1)
            holder = await find_port_holder(remote, port)
        record = await server_control.attach(remote, profile)
        listener = holder.pid
        assert record.pid == listener != group.pid and record.pgid == group.pid
        assert record.start_ticks == start_ticks(group.pid)
        assert record.pid_start_ticks == start_ticks(listener)
        os.kill(group.pid, signal.SIGKILL)  # the leader dies; the listener and a sleep stay in the group
        group.wait(10)
        result = await server_control.stop(remote, profile, grace_s=5)
        assert result.stopped and result.signals == ["TERM"], result.message
        await wait_until(lambda: not alive(listener))
    finally:
        kill_group(group.pid, group_start)


async def test_leaderless_group_without_proof_is_not_signalled(remote, tmp_path) -> None:
    port = free_port()
    listen = f"{sys.executable} -m http.server --bind 127.0.0.1 {port}"
    group = subprocess.Popen(
        ["sh", "-c", f"{listen} >/dev/null 2>&1 & sleep 300 & wait"], start_new_session=True
    )
    group_start = start_ticks(group.pid)
    try:
        profile = sleeper(tmp_path, f"noproof-{uuid.uuid4().hex[:6]}")
        profile = profile.model_copy(update={"server": profile.server.model_copy(update={"port": port})})
        deadline = time.monotonic() + 30
        while not (await find_port_holder(remote, port)).listening:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)
        record = await server_control.attach(remote, profile)
        members = [int(x) for x in Path(f"/proc/{group.pid}/task/{group.pid}/children").read_text().split()]
        rest = [m for m in members if m != record.pid]
        # listener and leader gone (reaped, not zombies, which would still prove the group): only the
        # sleep is left
        os.kill(record.pid, signal.SIGKILL)
        await wait_until(lambda: not Path(f"/proc/{record.pid}").exists())  # sh's `wait` reaps it
        os.kill(group.pid, signal.SIGKILL)
        group.wait(10)
        result = await server_control.stop(remote, profile, grace_s=1)
        assert not result.stopped and result.refused and result.signals == []
        assert "proves" in result.message
        assert all(alive(pid) for pid in rest)
    finally:
        kill_group(group.pid, group_start)


# -- stop with edited records -----------------------------------------------------------------------


async def test_edited_state_files_are_refused_and_nothing_is_signalled(
    sshd, remote, tmp_path, box_state_dir, server, victim
) -> None:
    profile, record = server
    path = box_state_dir / f"{profile.name}.json"
    original = json.loads(path.read_text())
    vstart = start_ticks(victim.pid)
    helper = remote.helper_info["pid"]

    def edited(**fields) -> str:
        return json.dumps({**original, **fields})

    cases = [
        ("group 0", edited(pid=0, pgid=0), "not a valid record"),
        ("group 1", edited(pid=1, pgid=1), "not a valid record"),
        ("pgid only", edited(pgid=victim.pid), "leads its own group"),
        # our start time on the victim's group: "reused" (the start differs), unless both processes
        # started within one clock tick (seen once), when the launch id is what tells them apart
        (
            "victim, our start",
            edited(pid=victim.pid, pgid=victim.pid),
            "group reused" if vstart != original.get("start_ticks") else "does not carry this launch's id",
        ),
        (
            "victim, its start",
            edited(pid=victim.pid, pgid=victim.pid, start_ticks=vstart, pid_start_ticks=vstart),
            "does not carry this launch's id",
        ),
        (
            "sshd's group",
            edited(
                pid=sshd.proc.pid,
                pgid=sshd.proc.pid,
                start_ticks=start_ticks(sshd.proc.pid),
                pid_start_ticks=start_ticks(sshd.proc.pid),
            ),
            "own session|holds sshd",
        ),
        (
            "the helper's group",
            edited(
                pid=helper, pgid=helper, start_ticks=start_ticks(helper), pid_start_ticks=start_ticks(helper)
            ),
            "own session",
        ),
        ("another profile", edited(profile="someone-else"), "names profile"),
        ("not json", "{ this is not json", "not a valid record"),
    ]
    for what, text, expect in cases:
        path.write_text(text)
        path.chmod(0o600)
        result = await server_control.stop(remote, profile, grace_s=1)
        assert result.signals == [] and not result.was_running, what
        assert any(word in result.message for word in expect.split("|")), (what, result.message)
        assert alive(victim.pid) and alive(record.pid) and alive(sshd.proc.pid), what

    # the file itself: writable by others, another owner, a symlink, a FIFO (which must not hang)
    path.write_text(json.dumps(original))
    path.chmod(0o666)
    result = await server_control.stop(remote, profile, grace_s=1)
    assert result.refused and "writable by group or others" in result.message
    path.chmod(0o600)
    if os.geteuid() == 0:
        os.chown(path, 65534, -1)
        result = await server_control.stop(remote, profile, grace_s=1)
        assert result.refused and "owned by uid 65534" in result.message
        os.chown(path, 0, -1)
    real = tmp_path / "elsewhere.json"
    path.rename(real)
    path.symlink_to(real)
    result = await server_control.stop(remote, profile, grace_s=1)
    assert result.refused and "cannot open" in result.message
    path.unlink()
    os.mkfifo(path)
    result = await asyncio.wait_for(server_control.stop(remote, profile, grace_s=1), 60)
    assert result.refused and "not a regular file" in result.message
    path.unlink()

    # the CLI says the same, exit 1, no traceback; status refuses too
    path.write_text(edited(pid=1, pgid=1))
    toml = write_toml(tmp_path, profile)
    for verb in ("stop", "status"):
        r = specdebug(sshd, verb, "-c", str(toml))
        assert r.returncode == 1 and "not a valid record" in r.stderr + r.stdout, (verb, r.stderr)
        assert "Traceback" not in r.stderr
    assert alive(victim.pid) and alive(record.pid)

    # the true record still works: the server (and only it) is stopped
    real.replace(path)
    result = await server_control.stop(remote, profile, grace_s=5)
    assert result.stopped and result.signals == ["TERM"], result.message
    await wait_until(lambda: not alive(record.pid))
    assert alive(victim.pid)


async def test_reused_pgid_and_stopped_record_are_not_running(remote, box_state_dir, server) -> None:
    profile, record = server
    path = box_state_dir / f"{profile.name}.json"
    original = json.loads(path.read_text())
    reused = {**original, "start_ticks": record.start_ticks + 1, "pid_start_ticks": record.start_ticks + 1}
    path.write_text(json.dumps(reused))
    st = await server_control.status(remote, profile)
    assert st.state == "exited" and "reused" in st.reason
    result = await server_control.stop(remote, profile, grace_s=1)
    assert not result.was_running and result.signals == [] and "group reused" in result.message
    assert alive(record.pid)

    path.write_text(json.dumps({**original, "stopped_at": time.time()}))
    st = await server_control.status(remote, profile)
    assert st.state == "stopped" and st.reason == "already stopped"
    result = await server_control.stop(remote, profile, grace_s=1)
    assert "already stopped" in result.message and result.signals == []
    assert alive(record.pid)


# -- a box whose sshd is PID 1 of a PID namespace ---------------------------------------------------


def _unshare_works() -> bool:
    if not shutil.which("unshare") or SSHD is None:
        return False
    r = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True)
    return r.returncode == 0


@pytest.mark.skipif(
    not _unshare_works(), reason="this machine does not allow unshare --pid --fork --mount-proc"
)
async def test_pid_1_of_a_pid_namespace(tmp_path_factory, tmp_path) -> None:
    box = start_sshd(tmp_path_factory.mktemp("nssshd"), wrap=["unshare", "--pid", "--fork", "--mount-proc"])
    remote = ssh_box(box.alias, ssh_config=box.config_path, connect_timeout=5.0)
    try:
        await remote.start()
        await remote.wait_connected(15)
        init = next(q for q in await remote.processes() if q.pid == 1)
        assert init.uid == os.geteuid()  # PID 1 is a process of the login user: uid checks alone would pass
        profile = sleeper(tmp_path, f"nsbox-{uuid.uuid4().hex[:6]}")
        with pytest.raises(LaunchRefused, match="PID 1 is init"):
            await server_control.attach(remote, profile, pid=1)
        for pgid in (1, 0, -1):
            out = await box_call(
                remote, "signal", {"pgid": pgid, "start_ticks": init.start_ticks, "sig": "TERM"}
            )
            assert out["state"] == "refused" and not out["signalled"]
        # a server launched on this box is recorded and stopped by its own group, inside the namespace
        record = await launch(remote, profile)
        assert record.pgid > 1
        result = await server_control.stop(remote, profile, grace_s=5)
        assert result.stopped and result.signals == ["TERM"]
        assert 1 in {q.pid for q in await remote.processes()}  # the namespace's init (sshd) lives on
    finally:
        await remote.close()
        box.stop()


async def test_state_dir_flag_keeps_records_apart(sshd, tmp_path, box_state_dir) -> None:
    """--state-dir (box side) wins over SPECDEBUG_STATE_DIR; a server recorded in one folder is
    invisible from another, so two demos or test runs never stop each other's servers."""
    profile = sleeper(tmp_path, f"statedir-{uuid.uuid4().hex[:6]}")
    toml = str(write_toml(tmp_path, profile))
    mine = tmp_path / "mine"
    r = specdebug(sshd, "launch", "-c", toml, "--state-dir", str(mine), "--json")
    assert r.returncode == 0, r.stderr
    pid = json.loads(r.stdout)["pid"]
    start = start_ticks(pid)
    try:
        assert (mine / f"{profile.name}.json").is_file()
        assert not (box_state_dir / f"{profile.name}.json").exists()
        other = specdebug(sshd, "stop", "-c", toml)  # the env's folder: never launched there
        assert other.returncode == 0 and "never launched" in other.stdout and alive(pid)
        r = specdebug(sshd, "stop", "-c", toml, "--state-dir", str(mine))
        assert r.returncode == 0, r.stderr
        await wait_until(lambda: not alive(pid))
    finally:
        kill_group(pid, start)
