"""Server records: process-group membership guards against PID reuse; the launch argv keeps user text as data."""

from __future__ import annotations

from specdebug.core.control.launch import LAUNCH_REPORT, LAUNCH_SCRIPT, launch_argv
from specdebug.core.control.records import ServerRecord, group_members
from specdebug.core.profiles import Profile
from specdebug.remote.api import ProcInfo


def proc(pid: int, pgid: int, start: int = 100, state: str = "S") -> ProcInfo:
    return ProcInfo(
        pid=pid, ppid=1, pgid=pgid, sid=pgid, uid=0, state=state, start_ticks=start, comm="python3"
    )


REC = ServerRecord(profile="p", pid=50, pgid=50, start_ticks=100, port=30000, log_file="/tmp/x.log")


def test_members_of_the_group_only() -> None:
    procs = [proc(50, 50), proc(51, 50, 120), proc(60, 60)]
    assert [p.pid for p in group_members(procs, REC)] == [50, 51]


def test_leader_gone_children_still_count() -> None:
    assert [p.pid for p in group_members([proc(51, 50, 120)], REC)] == [51]


def test_reused_pid_is_not_ours() -> None:
    assert group_members([proc(50, 50, start=999), proc(51, 50)], REC) == []


def test_zombies_do_not_count() -> None:
    assert group_members([proc(50, 50, state="Z")], REC) == []


def test_launch_argv_is_positional() -> None:
    profile = Profile.model_validate(
        {
            "name": "p",
            "server": {
                "argv": ["python3", "-c", "print('$(x)')"],
                "env": {"A": "1 2"},
                "port": 1,
                "log_file": "~/logs/p.log",
                "cwd": "~/work",
            },
        }
    )
    argv = launch_argv(profile)
    assert argv[:5] == ["sh", "-c", LAUNCH_SCRIPT, "sh", "~/logs/p.log"]
    assert argv[5] == "~/work"
    assert argv[6] is LAUNCH_REPORT  # the server side reports its own PID, group and start time
    assert argv[7:] == ["env", "A=1 2", "SPT_NOENV=1", "python3", "-c", "print('$(x)')"]
    assert launch_argv(profile, "abc")[-4] == "SPECDEBUG_LAUNCH_ID=abc"
    assert argv[2] is LAUNCH_SCRIPT  # the shell text is a constant; profile text only comes as parameters
    noenv = profile.model_copy(update={"server": profile.server.model_copy(update={"spt_noenv": False})})
    assert "SPT_NOENV=1" not in launch_argv(noenv)
