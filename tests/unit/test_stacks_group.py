"""core.stacks: grouping identical stacks across ranks, naming phases, shares and compares of records,
and the box module's parsing of py-spy's raw record format."""

from __future__ import annotations

from specdebug.box import stacks as box_stacks
from specdebug.core.stacks.group import Worker, group_workers, phase_of, rank_of, summary
from specdebug.core.stacks.record import compare, summarize


def frames(*names):
    return [{"name": n, "file": "x.py", "line": i} for i, n in enumerate(names)]


WAIT = frames("wait_for_peers", "pynccl_all_reduce", "all_reduce", "run_batch", "event_loop_normal")
STUCK = frames("synchronize", "forward_decode", "forward", "run_batch", "event_loop_normal")


def test_one_stuck_rank_is_singled_out():
    ws = [Worker(100 + r, r, f"sglang::scheduler_TP{r}", STUCK if r == 3 else WAIT) for r in range(8)]
    groups = group_workers(ws)
    assert [g.ranks for g in groups] == [[0, 1, 2, 4, 5, 6, 7], [3]]
    assert [g.differs for g in groups] == [False, True]
    assert summary(groups) == "7 ranks: NCCL collective wait; rank 3 differs: decode, in synchronize"


def test_a_tie_has_no_majority_and_errors_stay_out():
    ws = [Worker(1, 0, "a", WAIT), Worker(2, 1, "b", STUCK), Worker(3, 2, "c", error="gone")]
    groups = group_workers(ws)
    assert all(g.differs for g in groups) and summary(groups).startswith("no majority")
    assert summary([]) == "cannot tell: no stack was read"


def test_phases_and_ranks():
    assert phase_of(frames("forward_extend", "verify", "forward_batch_speculative_generation")).startswith(
        "verify"
    )
    assert phase_of(frames("CudaGraphRunner.replay", "forward_decode")) == "decode (CUDA graph replay)"
    assert phase_of(frames("load_model", "startup")) == "startup: load_weights"
    assert phase_of(frames("recv_requests", "event_loop_normal")) == "idle (waiting for requests)"
    assert phase_of(frames("foo")).startswith("cannot tell")
    assert rank_of("sglang::scheduler_TP5", 0) == 5 and rank_of("VLLM::Worker_TP2", 0) == 2
    assert rank_of("python3 -m x", 4) == 4


def test_raw_record_counts_main_thread_only(tmp_path):
    raw = tmp_path / "r.txt"
    raw.write_text(
        "thread (42): MainThread;<module> (<string>);event_loop_normal (s.py);verify (s.py);forward_extend (s.py) 80\n"
        "thread (42): MainThread;<module> (<string>);event_loop_normal (s.py);draft (s.py) 20\n"
        "thread (43): parent-watch;Thread._bootstrap (threading.py);poll (w.py) 100\n"
    )
    rec = box_stacks.record_counts(str(raw), 42)
    assert rec["total"] == 100
    assert rec["functions"]["verify (s.py)"] == 80 and rec["functions"]["event_loop_normal (s.py)"] == 100
    assert "poll (w.py)" not in rec["functions"]
    s = summarize({"42": rec, "44": {"error": "gone"}})
    assert s["paths"]["verify"] == 0.8 and s["paths"]["draft"] == 0.2
    other = summarize({"1": {"total": 10, "functions": {"verify (s.py)": 9, "draft (s.py)": 1}}})
    c = compare(s, other)
    verify = next(p for p in c["paths"] if p["path"] == "verify")
    assert round(verify["delta_pp"], 6) == 10.0
