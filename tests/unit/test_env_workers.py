"""Finding workers in a /proc snapshot: process tree, cmdline regex (never comm), explicit pids."""

from specdebug.core.control.workers import (
    common_launcher,
    descendants,
    match_cmdline,
    select_workers,
    server_kind,
)
from specdebug.remote.api import ProcInfo


def P(pid, ppid, cmdline, *, pgid=None, comm=None, uid=0, state="S"):  # noqa: N802
    return ProcInfo(
        pid=pid,
        ppid=ppid,
        pgid=pgid or pid,
        sid=1,
        uid=uid,
        state=state,
        start_ticks=1000 + pid,
        comm=comm or (cmdline[0][:15] if cmdline else "kworker"),
        cmdline=cmdline,
    )


TABLE = [
    P(1, 0, ["/sbin/init"]),
    P(2, 0, []),  # kernel thread
    P(100, 1, ["bash"]),
    P(200, 100, ["python3", "-m", "sglang.launch_server", "--tp", "2"], pgid=200),
    P(201, 200, ["sglang::scheduler_TP0"], pgid=200, comm="sglang::schedul"),
    P(202, 200, ["sglang::scheduler_TP1"], pgid=200, comm="sglang::schedul"),
    P(203, 200, ["sglang::detokenizer"], pgid=200),
    P(204, 201, ["python3", "-c", "from multiprocessing.resource_tracker import main"], pgid=200),
    P(300, 100, ["grep", "sglang::scheduler"]),
    P(301, 100, ["python3", "-m", "specdebug", "env", "gpubox", "--match", "sglang::scheduler"]),
    P(302, 100, ["pgrep", "-f", "--match=sglang::scheduler"]),
    P(400, 1, ["other"], comm="sglang::schedul"),  # comm alone must never match
]
BY_PID = {p.pid: p for p in TABLE}


def test_match_uses_cmdline_not_comm_and_skips_searchers():
    found = match_cmdline(TABLE, r"sglang::scheduler")
    assert [p.pid for p in found] == [201, 202]


def test_match_launcher_is_common_parent():
    sel = select_workers(TABLE, match="sglang::scheduler")
    assert [p.pid for p in sel.workers] == [201, 202]
    assert sel.launcher is not None and sel.launcher.pid == 200
    assert "sglang::scheduler" in sel.how


def test_tree_from_recorded_pid_and_group():
    sel = select_workers(TABLE, root_pid=200, pgid=200)
    assert [p.pid for p in sel.workers] == [201, 202, 203, 204]
    assert sel.launcher.pid == 200
    sel = select_workers(TABLE, root_pid=200, pgid=200, match=r"^sglang::scheduler")
    assert [p.pid for p in sel.workers] == [201, 202]


def test_group_survives_dead_launcher():
    orphans = [p for p in TABLE if p.pid != 200]
    sel = select_workers(orphans, root_pid=200, pgid=200)
    assert sel.launcher is None
    assert [p.pid for p in sel.workers] == [201, 202, 203, 204]


def test_explicit_pids_report_missing():
    sel = select_workers(TABLE, pids=[201, 999])
    assert [p.pid for p in sel.workers] == [201]
    assert sel.missing_pids == [999]
    assert sel.launcher.pid == 200  # parent of a single pid


def test_helpers():
    assert {p.pid for p in descendants(TABLE, 200)} == {201, 202, 203, 204}
    assert common_launcher(BY_PID, [201, 204]).pid == 200
    assert common_launcher(BY_PID, [200, 400]) is None  # only init above both
    assert server_kind(TABLE[4:5]) == "sglang"
    assert server_kind([P(5, 1, ["VLLM::Worker_TP0"])]) == "vllm"
    assert server_kind([P(5, 1, ["bash"])]) is None


def test_cycle_safe():
    weird = [P(10, 11, ["a"]), P(11, 10, ["b"])]
    common_launcher({p.pid: p for p in weird}, [10])  # terminates
    assert [p.pid for p in descendants(weird, 10)] == [11]
