"""StartupTracker: phases, ready criterion, error settle window, group death, timeout (no I/O)."""

from __future__ import annotations

from specdebug.core.control.events import GroupChange, HealthChange, ServerPhase, Verdict
from specdebug.core.control.records import ServerRecord
from specdebug.core.control.tracker import StartupTracker, startup_history
from specdebug.core.records import LaunchRecord, VerdictRecord

T0 = 1000.0
P = "[2026-01-01 10:00:00 TP0] "

STARTUP = [
    "[2026-01-01 10:00:00] server_args=ServerArgs(model_path='m', tp_size=8)",
    P + "Init torch distributed begin.",
    P + "Load weight begin. avail mem=78.00 GB",
    "[2026-01-01 10:00:00 TP1] Load weight begin. avail mem=78.00 GB",
    P + "Load weight end. elapsed=10.00 s, type=X, avail mem=40.00 GB, mem usage=38.00 GB.",
    P + "KV Cache is allocated. #tokens: 100000, K size: 4.00 GB, V size: 4.00 GB",
    P + "Memory pool end. avail mem=20.00 GB",
    P + "Capture cuda graph begin. This can take up to several minutes. avail mem=20.00 GB",
    P + "Capture cuda graph end. Time elapsed: 5.00 s. mem usage=1.00 GB. avail mem=19.00 GB.",
    P + "max_total_num_tokens=100000, chunked_prefill_size=8192, max_prefill_tokens=16384, context_len=4096",
    "[2026-01-01 10:00:00] INFO:     Started server process [123]",
    "[2026-01-01 10:00:00] INFO:     Waiting for application startup.",
    "[2026-01-01 10:00:00] INFO:     Application startup complete.",
    "[2026-01-01 10:00:00] INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)",
    '[2026-01-01 10:00:00] INFO:     127.0.0.1:40000 - "GET /get_model_info HTTP/1.1" 200 OK',
]
READY = "[2026-01-01 10:00:00] The server is fired up and ready to roll!"


def tracker(**kw) -> StartupTracker:
    args = {"kind": "sglang", "started_at": T0, "timeout_s": 60.0, "profile": "p", "pid": 7, "pgid": 7}
    args.update(kw)
    return StartupTracker(**args)


def feed(t: StartupTracker, lines, start: float = T0 + 1, step: float = 0.1) -> list:
    out = []
    for i, line in enumerate(lines):
        out += t.feed_line(line, start + i * step)
    return out


def verdicts(events) -> list[Verdict]:
    return [e for e in events if isinstance(e, Verdict)]


def test_phases_in_order_once_each() -> None:
    t = tracker()
    events = feed(t, STARTUP)
    names = [e.name for e in events if isinstance(e, ServerPhase)]
    assert names == [
        "args",
        "init_distributed",
        "load_weights",
        "kv_cache",
        "cuda_graph",
        "scheduler_ready",
        "http_server",
        "http_ready",
        "warmup",
    ]
    assert t.last_phase == "warmup"
    assert t.phases[0].name == "launch" and t.phases[0].elapsed_s == 0
    assert abs(t.phases[3].elapsed_s - 1.2) < 1e-6  # load_weights at the 3rd line


def test_ready_needs_health_and_ready_line() -> None:
    t = tracker()
    feed(t, STARTUP)
    assert not verdicts(t.health(503, T0 + 3))
    assert not verdicts(t.health(200, T0 + 3.5))  # health ok, ready line not yet
    out = t.feed_line(READY, T0 + 3.7)
    (v,) = verdicts(out)
    assert v.verdict == "ready" and v.ready_at == T0 + 3.7 and v.phases[-1].name == "ready"
    assert v.pid == 7 and v.reason is None
    # ready line first, health later: ready_at is the later of the two
    t2 = tracker()
    feed(t2, [*STARTUP, READY])
    (v2,) = verdicts(t2.health(200, T0 + 9))
    assert v2.ready_at == T0 + 9


def test_ready_line_optional() -> None:
    t = tracker(require_ready_line=False)
    feed(t, STARTUP[:3])
    (v,) = verdicts(t.health(200, T0 + 2))
    assert v.verdict == "ready"
    custom = tracker(kind="custom")  # no ready line known for custom servers
    assert verdicts(custom.health(200, T0 + 1))


def test_health_changes_reported_once() -> None:
    t = tracker()
    evs = t.health(None, T0 + 1) + t.health(None, T0 + 1.25) + t.health(503, T0 + 1.5) + t.health(503, T0 + 2)
    assert [e.status for e in evs if isinstance(e, HealthChange)] == [None, 503]


CRASH = [
    P + "Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/sglang/srt/managers/scheduler.py", line 2000, in run_scheduler_process',
    "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank)",
    '  File "/sglang/srt/model_executor/cuda_graph_runner.py", line 300, in __init__',
    '    raise Exception(f"Capture cuda graph failed: {e}\\n{CUDA_GRAPH_CAPTURE_FAILED_MSG}")',
    "Exception: Capture cuda graph failed: CUDA error: out of memory",
    "Possible solutions:",
    "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)",
]


def test_crash_reason_is_the_exception_line() -> None:
    t = tracker()
    feed(t, STARTUP[:8])
    out = feed(t, CRASH, start=T0 + 5, step=0.01)
    assert not verdicts(out)
    assert not verdicts(t.tick(T0 + 5.1))  # still collecting
    (v,) = verdicts(t.tick(T0 + 5.5))  # quiet for 0.3 s after the exception line
    assert v.verdict == "failed"
    # the message goes on over the lines after the exception line (SGLang's advice): carried along
    assert v.reason == (
        "Exception: Capture cuda graph failed: CUDA error: out of memory: Possible solutions: "
        "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)"
    )
    assert v.error_kind == "scheduler_exception"
    assert v.last_phase == "cuda_graph"
    assert CRASH[0] in v.excerpt and CRASH[5] in v.excerpt and STARTUP[7] in v.excerpt
    assert v.elapsed_s == 5.5


def test_error_without_exception_line_settles_on_trigger() -> None:
    t = tracker()
    t.feed_line(P + "Received sigquit from a child process. It usually means the child failed.", T0 + 2)
    assert not verdicts(t.tick(T0 + 2.5))
    (v,) = verdicts(t.tick(T0 + 2 + t.SETTLE_S))
    assert v.reason.startswith("Received sigquit") and v.error_kind == "sigquit"


def test_oom_line_is_its_own_reason() -> None:
    t = tracker()
    t.feed_line(P + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", T0 + 2)
    (v,) = verdicts(t.tick(T0 + 2.4))
    assert v.error_kind == "oom" and v.reason.startswith("torch.OutOfMemoryError")


def test_bare_traceback_is_an_error() -> None:
    t = tracker()
    feed(t, ["Traceback (most recent call last):", '  File "x.py", line 1', "ValueError: bad"], T0 + 1, 0.01)
    (v,) = verdicts(t.tick(T0 + 2))
    assert v.reason == "ValueError: bad"


def test_vllm_engine_core_failed() -> None:
    t = tracker(kind="vllm")
    lines = [
        "(APIServer pid=1) INFO 01-01 10:00:00 [api_server.py:1] vLLM API server version 0.11.0",
        "(EngineCore_DP0 pid=2) ERROR 01-01 10:00:05 [core.py:700] EngineCore failed to start.",
        "(EngineCore_DP0 pid=2) ERROR 01-01 10:00:05 [core.py:700] Traceback (most recent call last):",
        "(EngineCore_DP0 pid=2) ERROR 01-01 10:00:05 [core.py:700] ValueError: No available memory for the "
        "cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
    ]
    feed(t, lines, T0 + 1, 0.01)
    (v,) = verdicts(t.tick(T0 + 2))
    assert v.error_kind == "engine_core_failed"
    assert v.reason.startswith("ValueError: No available memory")


def test_group_death_fails_with_last_line() -> None:
    t = tracker()
    feed(t, STARTUP[:3])
    evs = t.group([7, 8, 9], T0 + 2) + t.group([7, 8, 9], T0 + 2.5)
    assert len([e for e in evs if isinstance(e, GroupChange)]) == 1
    t.group([], T0 + 2.7)
    t.group([7], T0 + 2.8)  # one empty listing alone is not a death
    assert not verdicts(t.tick(T0 + 3.5))
    t.group([], T0 + 2.9)
    t.group([], T0 + 3)
    assert not verdicts(t.tick(T0 + 3.2))
    t.feed_line("env: 'python9': No such file or directory", T0 + 3.3)  # late line still makes it in
    (v,) = verdicts(t.tick(T0 + 3 + t.EXIT_SETTLE_S))
    assert v.error_kind == "exited" and "process group 7 is gone" in v.reason
    assert "python9" in v.reason


def test_timeout_names_the_phase() -> None:
    t = tracker(timeout_s=10)
    feed(t, STARTUP)  # ends in warmup
    t.health(503, T0 + 4)
    assert not verdicts(t.tick(T0 + 9.9))
    (v,) = verdicts(t.tick(T0 + 10))
    assert v.error_kind == "timeout" and v.last_phase == "warmup"
    assert "timed out after 10 s in phase warmup" in v.reason and "503" in v.reason
    assert v.excerpt[-1] == STARTUP[-1]


def test_nothing_after_verdict() -> None:
    t = tracker(timeout_s=1)
    t.tick(T0 + 1)
    assert not verdicts(t.tick(T0 + 2)) and not verdicts(t.health(200, T0 + 2))


def test_summary_shape() -> None:
    t = tracker()
    feed(t, [*STARTUP, READY])
    (v,) = verdicts(t.health(200, T0 + 4))
    s = v.summary()
    assert {"verdict", "phases", "ready_at", "reason", "excerpt", "pid", "pgid"} <= set(s)
    assert set(s["phases"][0]) == {"name", "at", "elapsed_s"}


def _verdict(verdict: str, profile: str, elapsed_s: float, phases: dict[str, float] | None = None, **kw):
    steps = [ServerPhase(name=n, at=0.0, elapsed_s=e) for n, e in (phases or {}).items()]
    return VerdictRecord(
        outcome=Verdict(verdict=verdict, profile=profile, elapsed_s=elapsed_s, phases=steps, **kw)
    )


def _launch(pid: int, *, attached: bool = False):
    server = ServerRecord(profile="p", pid=pid, pgid=pid, port=1, log_file="/l", attached=attached)
    return LaunchRecord(server=server)


def test_history_eta() -> None:
    events = [
        _verdict("ready", "p", 10, {"load_weights": 2}),
        _verdict("ready", "p", 14, {"load_weights": 4}),
        _verdict("ready", "p", 12),
        _verdict("failed", "p", 99),
        _verdict("ready", "other", 99),
    ]
    h = startup_history(events, "p")
    assert h is not None and h.runs == 3 and h.expected_total_s == 12
    assert h.phase_starts["load_weights"] == 3
    assert h.eta(5) == 7 and h.eta(20) == 0
    assert startup_history(events, "nope") is None


def test_history_leaves_out_attached_servers():
    from specdebug.core.control.tracker import startup_history

    events = [
        _launch(10),
        _verdict("ready", "p", 300.0, pid=10),
        _launch(20, attached=True),
        _verdict("ready", "p", 0.1, pid=20),
    ]
    history = startup_history(events, "p")
    assert history.runs == 1 and history.expected_total_s == 300.0


def test_a_killed_main_process_fails_at_once_naming_the_children_still_exiting():
    """kill -9 of the leader: its TP children live on for seconds; the verdict must not wait for them."""
    t = tracker()
    t.group([7, 8, 9], T0 + 2)
    assert t.verdict is None
    t.group([8, 9], T0 + 2.5)  # the leader is gone, the children are still exiting
    t.tick(T0 + 2.6)
    assert t.verdict is None  # the last log lines may still come (QUIET_S, at most EXIT_SETTLE_S)
    t.tick(T0 + 2.5 + StartupTracker.EXIT_SETTLE_S + 0.01)
    v = t.verdict
    assert v is not None and v.verdict == "failed" and v.error_kind == "exited"
    assert "main process 7 died" in v.reason and "8, 9" in v.reason


def test_a_leader_never_listed_is_not_taken_for_dead():
    """A record whose PID the listing never showed (it is not in the group yet) says nothing early."""
    t = tracker()
    t.group([8, 9], T0 + 2)
    t.tick(T0 + 4)
    assert t.verdict is None


def test_the_main_process_seen_ending_on_the_box_fails_once_the_log_is_quiet():
    """The box watched the main PID and saw it end: no second listing is needed; the verdict names
    it once the log is quiet (QUIET_S), with the members the last listing showed."""
    t = tracker()
    t.group([7, 8, 9], T0 + 2)
    t.leader_gone(T0 + 2.1)
    t.tick(T0 + 2.2)
    assert t.verdict is None  # the last log lines may still come
    t.tick(T0 + 2.1 + StartupTracker.QUIET_S + 0.01)
    v = t.verdict
    assert v is not None and v.verdict == "failed" and v.error_kind == "exited"
    assert "main process 7 died" in v.reason and "8, 9" in v.reason


def test_a_main_process_ending_after_an_error_keeps_the_errors_verdict():
    t = tracker()
    t.group([7], T0 + 1)
    t.feed_line("RuntimeError: CUDA out of memory", T0 + 1.5)
    failing = t.failing
    t.leader_gone(T0 + 1.6)
    assert t.failing is failing  # the error line's failure, not replaced by the exit


BIND = (
    "[2026-01-01 10:00:00] ERROR:    [Errno 98] error while attempting to bind on address "
    "('127.0.0.1', 30000): address already in use"
)
SHUTDOWN = [
    "[2026-01-01 10:00:00] INFO:     Waiting for application shutdown.",
    "[2026-01-01 10:00:00] INFO:     Application shutdown complete.",
]
OTHER = "port 30000 is in use by PID 99 (python3 -m http.server 30000), not of the server's process group 7"


def test_a_health_answer_from_another_processs_listener_is_not_ready() -> None:
    """Issue 41: node1's server answered node0's /health; node0 was called ready, then failed to
    bind.  Health is the server's only when the box says its listener is of the launched group."""
    t = tracker(check_listener=True)
    events = feed(t, STARTUP)
    events += t.health(200, T0 + 3)
    assert t.listener_check_due(T0 + 3) and not verdicts(events)
    events += t.listener(False, OTHER, T0 + 3.1)
    events += feed(t, [READY], start=T0 + 3.2)
    events += t.health(200, T0 + 3.3)
    assert not verdicts(events) and t.verdict is None
    events += feed(t, [BIND, *SHUTDOWN], start=T0 + 3.4, step=0.01)
    events += t.group([], T0 + 4) + t.group([], T0 + 4.5) + t.tick(T0 + 6)
    (v,) = verdicts(events)
    assert v.verdict == "failed"
    assert v.reason.startswith("ERROR:    [Errno 98] error while attempting to bind")
    assert "Application shutdown complete" not in v.reason
    assert f"answered by another process ({OTHER})" in v.reason


def test_the_listener_is_checked_again_at_the_verdict() -> None:
    """Found the server's at the first health answer, and again once the ready line makes it ready."""
    t = tracker(check_listener=True)
    feed(t, STARTUP)
    t.health(200, T0 + 3)
    assert t.listener(True, "ours", T0 + 3.1) == []  # no ready line yet
    assert not t.listener_check_due(T0 + 3.2)
    feed(t, [READY], start=T0 + 4)
    assert t.verdict is None and t.listener_check_due(T0 + 4.1)
    (v,) = verdicts(t.listener(True, "ours", T0 + 4.2))
    assert v.verdict == "ready" and v.ready_at == T0 + 4


def test_a_foreign_listener_is_named_by_the_timeout() -> None:
    t = tracker(check_listener=True, require_ready_line=False)
    t.health(200, T0 + 1)
    t.listener(False, OTHER, T0 + 1.1)
    assert not t.listener_check_due(T0 + 1.5) and t.listener_check_due(
        T0 + 2.2
    )  # asked again, not every poll
    (v,) = verdicts(t.tick(T0 + 61))
    assert v.verdict == "failed" and f"health answered by another process: {OTHER}" in v.reason


def test_a_listener_the_box_cannot_see_keeps_the_health_answer() -> None:
    t = tracker(check_listener=True, require_ready_line=False)
    t.health(200, T0 + 1)
    (v,) = verdicts(t.listener(None, "who listens could not be checked", T0 + 1.1))
    assert v.verdict == "ready"
