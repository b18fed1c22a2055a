"""The target of `env`/`stacks` is the profile's recorded server or nothing (issue 38).

A profile whose server is not running used to fall back to every process on the box matching
`[workers] match`: another user's server (or a bisection's trial server) answered for it, with
"... missing on 8/60 workers ... verdict: FAILED".  Now: not running is said, and a box-wide look is
asked for explicitly, labelled, and never a verdict.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from specdebug.core.control.records import ServerRecord
from specdebug.core.env.probe import ServerNotRunning, check_env, query_for_profile
from specdebug.core.profiles import load_profile
from specdebug.core.stacks.collect import StacksError, find_workers
from specdebug.remote.api import FileRead, ProcInfo
from tests.boxes import TableBox


def proc(pid: int, ppid: int, pgid: int, cmdline: list[str], uid: int = 1001) -> ProcInfo:
    return ProcInfo(
        pid=pid, ppid=ppid, pgid=pgid, sid=1, uid=uid, state="S", start_ticks=5000,
        comm=cmdline[0][:15], cmdline=cmdline,
    )  # fmt: skip


# another user's server on the same box: its workers match the profile's [workers] match
OTHERS = [
    proc(1, 0, 1, ["/sbin/init"], uid=0),
    proc(700, 1, 700, ["python3", "-m", "sglang.launch_server", "--tp", "2"]),
    proc(701, 700, 700, ["sglang::scheduler_TP0"]),
    proc(702, 700, 700, ["sglang::scheduler_TP1"]),
]
FILES = {
    "/proc/stat": FileRead("/proc/stat", b"btime 1700000000\n"),
    "/etc/passwd": FileRead("/etc/passwd", b"bob:x:1001:1001::/home/bob:/bin/sh\n"),
    **{f"/proc/{p}/environ": FileRead(f"/proc/{p}/environ", b"PATH=/bin\0") for p in (700, 701, 702)},
}


@pytest.fixture
def profile(tmp_path: Path):
    path = tmp_path / "mine.toml"
    path.write_text(
        'name = "mine"\n[server]\nkind = "sglang"\nargv = ["python3", "-m", "sglang.launch_server"]\n'
        'port = 30000\nenv = { NCCL_P2P_LEVEL = "NVL" }\n[workers]\nmatch = "sglang::scheduler"\n'
    )
    return load_profile(path)


def box(record: ServerRecord | None) -> TableBox:
    state = {"state": "missing"} if record is None else {"state": "ok", "data": record.model_dump_json()}
    return TableBox("gpubox", OTHERS, FILES, box_ops={"read_state": state})


def record(**kw) -> ServerRecord:
    return ServerRecord(profile="mine", pid=500, pgid=500, port=30000, log_file="/tmp/mine.log", **kw)


@pytest.mark.parametrize(
    ("rec", "why"),
    [
        (None, "specdebug has no launch record of it here"),
        (record(stopped_at=1_700_000_000.0), "its launch record says it stopped at"),
        (record(), "its recorded process group 500 (pid 500) is gone"),
    ],
)
async def test_a_profile_not_running_is_said_never_answered_by_matching_processes(profile, rec, why):
    with pytest.raises(ServerNotRunning) as info:
        await query_for_profile(box(rec), profile)
    assert str(info.value).startswith("mine is not running on gpubox: ") and why in str(info.value)
    assert "--all-matching" in (info.value.hint or "")
    with pytest.raises(StacksError, match="mine is not running on gpubox"):  # no py-spy on PIDs 701, 702
        await find_workers(box(rec), profile)


async def test_the_running_record_is_the_target(profile):
    mine = [
        proc(500, 1, 500, ["python3", "-m", "sglang.launch_server"]),
        proc(501, 500, 500, ["sglang::scheduler_TP0"]),
    ]
    remote = box(record())
    remote.procs = OTHERS + mine
    query = await query_for_profile(remote, profile)
    assert (query.root_pid, query.pgid, query.box_wide) == (500, 500, False)
    report = await check_env(remote, query)
    assert [w.pid for w in report.workers] == [501]  # never the other user's 701, 702


async def test_a_box_wide_look_is_asked_for_labelled_and_never_a_verdict(profile):
    remote = box(None)
    query = await query_for_profile(remote, profile, all_matching=True)
    assert query.box_wide and query.match == "sglang::scheduler" and query.log_path is None
    report = await check_env(remote, query)
    s = report.summary
    assert report.box_wide and [w.pid for w in report.workers] == [701, 702]
    assert s.ok is None and s.verdict == "box-wide look" and s.reasons == []
    assert s.exit_code == 0  # a look that found processes; NCCL_P2P_LEVEL "missing" there is no failure
    assert s.warnings[0].startswith("box-wide look: 2 processes (cmdline matching /sglang::scheduler/)")
    assert "not this profile's server" in s.warnings[0]
    none = await check_env(TableBox("gpubox", OTHERS[:1], FILES), query)
    assert none.summary.exit_code == 1 and none.summary.ok is None
