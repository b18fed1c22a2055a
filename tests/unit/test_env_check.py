"""The env check: environ states, per-variable statuses, NCCL proof, launcher inference, secrets."""

import json

import pytest

from specdebug.core.env.model import EnvQuery, parse_nccl_env_line
from specdebug.core.env.probe import check_env
from specdebug.core.env.proc import classify_environ, parse_environ
from specdebug.core.env.report import build_report
from specdebug.remote.api import FileRead, ProcInfo
from tests.boxes import TableBox

TOKEN = "hf_VerySecretTokenValue123"


def P(pid, ppid, cmdline, *, uid=0, state="S"):
    return ProcInfo(
        pid=pid,
        ppid=ppid,
        pgid=200,
        sid=1,
        uid=uid,
        state=state,
        start_ticks=5000,
        comm=cmdline[0][:15],
        cmdline=cmdline,
    )


def environ(**env) -> bytes:
    return b"".join(f"{k}={v}".encode() + b"\0" for k, v in env.items())


CLOBBERED = b"\0" * 300
PROCS = [
    P(1, 0, ["/sbin/init"]),
    P(200, 1, ["python3", "-m", "specdebug.sim", "--tp", "2", "--api-key", "sk-live-abcdef"]),
    P(201, 200, ["sglang::scheduler_TP0"]),
    P(202, 200, ["sglang::scheduler_TP1"]),
]
NCCL = {"NCCL_PROTO": "Simple", "NCCL_ALGO": "Ring"}


def reads(envs: dict[int, bytes | str], *, status_uid=None) -> dict[str, FileRead]:
    out = {
        "/proc/stat": FileRead("/proc/stat", b"cpu 1 2 3\nbtime 1700000000\n"),
        "/etc/passwd": FileRead(
            "/etc/passwd", b"root:x:0:0::/root:/bin/sh\nbob:x:1001:1001::/home/bob:/bin/sh\n"
        ),
    }
    for pid, env in envs.items():
        path = f"/proc/{pid}/environ"
        out[path] = FileRead(path, error=env) if isinstance(env, str) else FileRead(path, env)
        uid = (status_uid or {}).get(pid, 0)
        out[f"/proc/{pid}/status"] = FileRead(
            f"/proc/{pid}/status",
            f"Name:\tx\nState:\tS (sleeping)\nPPid:\t200\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n".encode(),
        )
    return out


def q(**kw) -> EnvQuery:
    kw.setdefault("match", "sglang::scheduler")
    return EnvQuery(**kw)


def test_parse_environ_states():
    assert parse_environ(environ(A="1", B="x=y")) == {"A": "1", "B": "x=y"}
    assert parse_environ(CLOBBERED) is None
    assert parse_environ(b"sglang::scheduler_TP0\0\0\0") is None
    assert classify_environ(FileRead("p", b""), "S")[0] == "readable"
    assert classify_environ(FileRead("p", CLOBBERED), "S")[0] == "clobbered"
    assert classify_environ(FileRead("p", error="EACCES"), "S")[0] == "denied"
    assert classify_environ(FileRead("p", error="EPERM"), "S")[0] == "denied"
    assert classify_environ(FileRead("p", error="ENOENT"), "S")[0] == "gone"
    assert classify_environ(FileRead("p", error="ESRCH"), "S")[0] == "gone"
    assert classify_environ(FileRead("p", b""), "Z")[0] == "gone"
    assert classify_environ(None, None)[0] == "gone"


def test_parse_nccl_lines():
    a = parse_nccl_env_line("gpuhost:41733:41790 [1] NCCL INFO NCCL_IB_DISABLE set by environment to 1.")
    assert (a.host, a.pid, a.tid, a.rank, a.name, a.value) == (
        "gpuhost",
        41733,
        41790,
        1,
        "NCCL_IB_DISABLE",
        "1",
    )
    b = parse_nccl_env_line(
        "[2025-10-22 10:27:57 TP0] box-1.lan:7:8 [0] NCCL INFO NCCL_PROTO set by environment to Simple\r\n"
    )
    assert (b.pid, b.name, b.value) == (7, "NCCL_PROTO", "Simple")
    assert parse_nccl_env_line("gpuhost:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC") is None
    assert parse_nccl_env_line("random text set by environment to x") is None


def test_all_ok_readable():
    env = environ(
        NCCL_PROTO="Simple", NCCL_ALGO="Ring", SPT_NOENV="1", CUDA_VISIBLE_DEVICES="0,1", PATH="/bin"
    )
    rep = build_report(q(expected=NCCL), PROCS, reads({200: env, 201: env, 202: env}))
    assert rep.summary.exit_code == 0 and rep.summary.ok
    assert [w.pid for w in rep.workers] == [201, 202]
    w = rep.workers[0]
    assert w.environ_state == "readable"
    assert w.vars["NCCL_PROTO"].model_dump(include={"status", "expected", "actual", "source"}) == {
        "status": "ok",
        "expected": "Simple",
        "actual": "Simple",
        "source": "environ",
    }
    assert w.extra == {"CUDA_VISIBLE_DEVICES": "0,1"}  # prefix-filtered, PATH not shown
    assert w.user == "root" and w.start_time == 1700000000 + 50
    assert rep.launcher.pid == 200 and rep.launcher.vars["NCCL_ALGO"].status == "ok"
    assert rep.summary.counts["ok"] == 4
    assert "read for 2/2 workers" in rep.summary.method


def test_missing_names_given():
    env = environ(SPT_NOENV="1")
    rep = build_report(q(expected=NCCL), PROCS, reads({200: environ(**NCCL), 201: env, 202: env}))
    assert rep.summary.exit_code == 1
    assert rep.workers[0].vars["NCCL_ALGO"].status == "missing"
    text = "\n".join(rep.summary.reasons)
    assert "NCCL_PROTO missing on 2/2 workers" in text and "NCCL_ALGO missing" in text


def test_different_shows_both_values():
    rep = build_report(
        q(expected=NCCL),
        PROCS,
        reads({201: environ(NCCL_PROTO="LL", NCCL_ALGO="Ring"), 202: environ(**NCCL)}),
    )
    vc = rep.workers[0].vars["NCCL_PROTO"]
    assert (vc.status, vc.expected, vc.actual) == ("different", "Simple", "LL")
    assert rep.workers[1].vars["NCCL_PROTO"].status == "ok"
    assert any("expected Simple, actual LL" in r for r in rep.summary.reasons)
    assert rep.summary.exit_code == 1


def test_clobbered_explains_and_infers_from_launcher():
    rep = build_report(q(expected=NCCL), PROCS, reads({200: environ(**NCCL), 201: CLOBBERED, 202: CLOBBERED}))
    assert rep.summary.exit_code == 1
    assert [w.environ_state for w in rep.workers] == ["clobbered", "clobbered"]
    vc = rep.workers[0].vars["NCCL_PROTO"]
    assert (vc.status, vc.source, vc.actual) == ("unverifiable", "launcher", "Simple")
    assert "inference" in vc.note
    assert (
        "environ of sglang::scheduler_TP0 (pid 201) is clobbered by setproctitle; relaunch with SPT_NOENV=1 "
        "(specdebug launch sets it by default)"
    ) in rep.summary.reasons
    assert {e.source for e in rep.evidence} == {"launcher"}


def test_clobbered_with_nccl_proof():
    lines = [
        "box:201:900 [0] NCCL INFO NCCL_PROTO set by environment to Simple",
        "box:201:900 [0] NCCL INFO NCCL_ALGO set by environment to Ring",
        "box:202:901 [1] NCCL INFO NCCL_PROTO set by environment to LL",
        "box:999:1 [0] NCCL INFO NCCL_PROTO set by environment to Simple",  # stale pid from an older run
    ]
    rep = build_report(
        q(expected=NCCL, log_path="/tmp/x.log"),
        PROCS,
        reads({200: environ(**NCCL), 201: CLOBBERED, 202: CLOBBERED}),
        lines,
    )
    w0, w1 = rep.workers
    assert w0.vars["NCCL_PROTO"].status == "ok" and w0.vars["NCCL_PROTO"].source == "nccl_log"
    assert w1.vars["NCCL_PROTO"].status == "different" and w1.vars["NCCL_PROTO"].actual == "LL"
    assert w1.vars["NCCL_ALGO"].status == "unverifiable"
    nccl = [e for e in rep.evidence if e.source == "nccl_log"]
    assert [(e.pid, e.name) for e in nccl] == [(201, "NCCL_PROTO"), (201, "NCCL_ALGO"), (202, "NCCL_PROTO")]
    assert "NCCL 'set by environment' lines for 2/2 workers in /tmp/x.log" in rep.summary.method
    # worker 201 is fully proven: its clobbered environ is only a warning
    assert not any("pid 201" in r for r in rep.summary.reasons)
    assert any("pid 201" in w for w in rep.summary.warnings)
    assert any("pid 202) is clobbered" in r for r in rep.summary.reasons)


def test_all_proven_by_nccl_exits_zero():
    lines = [
        f"box:{pid}:1 [{i}] NCCL INFO {k} set by environment to {v}"
        for i, pid in enumerate((201, 202))
        for k, v in NCCL.items()
    ]
    rep = build_report(q(expected=NCCL), PROCS, reads({201: CLOBBERED, 202: CLOBBERED}), lines)
    assert rep.summary.exit_code == 0


def test_nccl_integer_compares_numerically_and_overrides_exec_environ():
    lines = ["box:201:1 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1."]
    rep = build_report(
        q(expected={"NCCL_IB_DISABLE": "01"}),
        PROCS,
        reads({201: environ(NCCL_IB_DISABLE="0"), 202: environ(NCCL_IB_DISABLE="01")}),
        lines,
    )
    w0, w1 = rep.workers
    assert (w0.vars["NCCL_IB_DISABLE"].status, w0.vars["NCCL_IB_DISABLE"].source) == ("ok", "nccl_log")
    assert "NCCL read 1" in w0.vars["NCCL_IB_DISABLE"].note
    assert w1.vars["NCCL_IB_DISABLE"].status == "ok"


def test_denied_only_on_its_row():
    rep = build_report(
        q(pids=[201, 202], match=None, expected=NCCL),
        PROCS,
        reads({201: "EACCES", 202: environ(**NCCL)}, status_uid={201: 1001}),
    )
    w0, w1 = rep.workers
    assert w0.environ_state == "denied" and w0.user == "bob" and w0.environ_error == "EACCES"
    assert w0.vars["NCCL_PROTO"].status == "unverifiable"
    assert w1.environ_state == "readable" and w1.vars["NCCL_PROTO"].status == "ok"
    assert any("pid 201, user bob" in r for r in rep.summary.reasons)


def test_gone_pid_keeps_others():
    rep = build_report(
        q(pids=[202, 999], match=None, expected=NCCL), PROCS, reads({202: environ(**NCCL), 999: "ENOENT"})
    )
    assert [(w.pid, w.environ_state) for w in rep.workers] == [(202, "readable"), (999, "gone")]
    assert "pid 999 is gone" in rep.summary.reasons


def test_no_workers_is_failure():
    rep = build_report(q(match="nothing-like-this", expected=NCCL), PROCS, reads({}))
    assert rep.summary.exit_code == 1
    assert rep.summary.reasons[0].startswith("no workers found")


def test_secrets_masked_everywhere_but_compared():
    env = environ(HF_TOKEN=TOKEN, NCCL_PROTO="Simple", NCCL_API_KEY="ncclsecretvalue")
    other = environ(HF_TOKEN="hf_AnotherSecretValue999", NCCL_PROTO="Simple", NCCL_API_KEY="ncclsecretvalue")
    lines = [f"box:201:1 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to {TOKEN}"]
    rep = build_report(
        q(expected={"HF_TOKEN": TOKEN, "NCCL_PROTO": "Simple"}, log_path="l"),
        PROCS,
        reads({200: env, 201: env, 202: other}),
        lines,
    )
    dumped = rep.model_dump_json()
    for secret in (TOKEN, "hf_AnotherSecretValue999", "ncclsecretvalue", "sk-live-abcdef"):
        assert secret not in dumped
    w0, w1 = rep.workers
    assert w0.vars["HF_TOKEN"].status == "ok"
    assert w1.vars["HF_TOKEN"].status == "different"
    assert w1.vars["HF_TOKEN"].expected != w1.vars["HF_TOKEN"].actual  # fingerprints differ
    assert w0.extra["NCCL_API_KEY"].startswith("<masked #")
    assert "--api-key <masked #" in rep.launcher.title


def test_show_secrets_reveals():
    env = environ(HF_TOKEN=TOKEN)
    rep = build_report(q(expected={"HF_TOKEN": TOKEN}, show_secrets=True), PROCS, reads({201: env, 202: env}))
    assert rep.workers[0].vars["HF_TOKEN"].actual == TOKEN
    assert rep.masked is False


def test_sglang_overwrites_flagged():
    """Older SGLang (unconditional `_set_envs_and_config`) replaced the user's value; current SGLang
    keeping it is covered in tests/unit/test_format_gaps.py."""
    env = environ(NCCL_CUMEM_ENABLE="0", CUDA_DEVICE_MAX_CONNECTIONS="8")
    rep = build_report(
        q(expected={"NCCL_CUMEM_ENABLE": "1"}, server_version="0.4.9"),
        PROCS,
        reads({200: environ(NCCL_CUMEM_ENABLE="1"), 201: env, 202: env}),
    )
    vc = rep.workers[0].vars["NCCL_CUMEM_ENABLE"]
    assert vc.status == "different" and vc.overwritten_by_server
    assert rep.summary.server_kind == "sglang"
    assert any("never reaches the workers" in w for w in rep.summary.warnings)
    assert any("SGLang 0.4.9 sets NCCL_CUMEM_ENABLE=0" in r for r in rep.summary.reasons)


def test_expect_from_launcher():
    launcher = environ(NCCL_PROTO="Simple", NCCL_ALGO="Ring", HOME="/root")
    rep = build_report(
        q(expect_from_launcher=True),
        PROCS,
        reads({200: launcher, 201: environ(NCCL_PROTO="Simple"), 202: launcher}),
    )
    assert set(rep.expected) == {"NCCL_PROTO", "NCCL_ALGO"}
    assert rep.expected_source == "launcher pid 200"
    assert rep.workers[0].vars["NCCL_ALGO"].status == "missing"
    assert rep.summary.exit_code == 1
    rep = build_report(
        q(expect_from_launcher=True), PROCS, reads({200: CLOBBERED, 201: launcher, 202: launcher})
    )
    assert any("--expect-from-launcher" in r for r in rep.summary.reasons)


def test_no_expectation_lists_only():
    env = environ(NCCL_PROTO="Simple")
    rep = build_report(q(), PROCS, reads({201: env, 202: CLOBBERED}))
    assert rep.summary.exit_code == 0
    assert any("no expected variables" in w for w in rep.summary.warnings)
    assert rep.workers[0].extra == {"NCCL_PROTO": "Simple"}
    assert rep.env_of(201) == {"NCCL_PROTO": "Simple"}


def FakeRemote(files: dict[str, FileRead], log: str | None) -> TableBox:
    """The box of these tests: PROCS and `files`, and a log to grep (None: no log)."""
    return TableBox("fake", PROCS, files, log=log)


async def test_check_env_reads_everything_in_one_probe():
    files = reads({200: environ(**NCCL), 201: CLOBBERED, 202: CLOBBERED})
    log = "noise\nbox:201:5 [0] NCCL INFO NCCL_PROTO set by environment to Simple\n"
    remote = FakeRemote(files, log)
    rep = await check_env(remote, q(expected=NCCL, log_path="~/srv.log"))
    reads_calls = [c for c in remote.calls if c[0] == "read"]
    assert len(reads_calls) == 1
    assert {"/proc/201/environ", "/proc/202/cmdline", "/proc/200/status"} <= set(reads_calls[0][1])
    run = [c for c in remote.calls if c[0] == "run"][0][1]
    assert run[-1] == "srv.log" and run[0] == "grep"
    assert rep.workers[0].vars["NCCL_PROTO"].source == "nccl_log"
    json.loads(rep.model_dump_json())


async def test_check_env_log_missing_is_a_warning():
    rep = await check_env(
        FakeRemote(reads({201: environ(**NCCL), 202: environ(**NCCL)}), None),
        q(expected=NCCL, log_path="x.log"),
    )
    assert rep.summary.exit_code == 0
    assert any("cannot read log x.log" in w for w in rep.summary.warnings)


@pytest.mark.parametrize("state", ["Z", "X"])
def test_zombie_is_gone(state):
    procs = PROCS[:2] + [P(201, 200, ["sglang::scheduler_TP0"], state=state)]
    rep = build_report(
        q(pids=[201], match=None, expected=NCCL),
        procs,
        {
            "/proc/201/environ": FileRead("/proc/201/environ", b""),
            "/proc/201/status": FileRead("/proc/201/status", f"State:\t{state} (zombie)\n".encode()),
        },
    )
    assert rep.workers[0].environ_state == "gone"


def test_overwritten_var_is_not_inferred_from_launcher():
    rep = build_report(
        q(expected={"NCCL_CUMEM_ENABLE": "1"}),
        PROCS,
        reads({200: environ(NCCL_CUMEM_ENABLE="1"), 201: CLOBBERED, 202: CLOBBERED}),
    )
    vc = rep.workers[0].vars["NCCL_CUMEM_ENABLE"]
    assert (vc.status, vc.actual, vc.source) == ("unverifiable", None, "environ")
    assert not rep.evidence
