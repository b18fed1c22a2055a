"""core.stacks on real vLLM shapes (issue 37): py-spy --json dumps of a vLLM server's processes, as
the box module reads them, named and grouped by role.

The frames are real vLLM's (0.32.0 sources: v1/engine/core.py, v1/executor/multiproc_executor.py,
distributed/device_communicators/shm_broadcast.py, v1/worker/gpu_worker.py and gpu_model_runner.py,
v1/sample/, v1/spec_decode/ngram_proposer.py, distributed/parallel_state.py), in py-spy's --json form
(qualname as "name", "short_filename" relative to site-packages, leaf first).
"""

from __future__ import annotations

import json

from specdebug.box import stacks as box_stacks
from specdebug.core.stacks.group import Worker, dump_lines, group_workers, main_frames, phase_of, summary
from specdebug.core.stacks.roles import API_SERVER, ENGINE_CORE, WORKER, identify, worker_ranks

SPAWN = [
    ("BaseProcess.run", "multiprocessing/process.py"),
    ("BaseProcess._bootstrap", "multiprocessing/process.py"),
    ("_main", "multiprocessing/spawn.py"),
    ("spawn_main", "multiprocessing/spawn.py"),
    ("<module>", "<string>"),
]
EXECUTOR = "vllm/v1/executor/multiproc_executor.py"
SHM = "vllm/distributed/device_communicators/shm_broadcast.py"
RUNNER = "vllm/v1/worker/gpu_model_runner.py"
WORKER_LOOP = [
    ("WorkerProc.worker_busy_loop", EXECUTOR),
    ("WorkerProc.worker_main", EXECUTOR),
    *SPAWN,
]
IDLE_WORKER = [
    ("Poller.poll", "zmq/sugar/poll.py"),
    ("SpinCondition.wait", SHM),
    ("MessageQueue.acquire_read", SHM),
    ("_GeneratorContextManager.__enter__", "contextlib.py"),
    ("MessageQueue.dequeue", SHM),
    *WORKER_LOOP,
]
IDLE_CORE = [
    ("Condition.wait", "threading.py"),
    ("Queue.get", "queue.py"),
    ("EngineCoreProc._process_input_queue", "vllm/v1/engine/core.py"),
    ("EngineCoreProc.run_busy_loop", "vllm/v1/engine/core.py"),
    ("run_engine_core", "vllm/v1/engine/core.py"),
    *SPAWN,
]
RPC = [
    ("decorate_context", "torch/utils/_contextlib.py"),
    ("WorkerProc._execute_worker_rpc", EXECUTOR),
    *WORKER_LOOP,
]
FORWARD_ALL_REDUCE = [
    ("CpuCommunicator.all_reduce", "vllm/distributed/device_communicators/cpu_communicator.py"),
    ("GroupCoordinator._all_reduce_out_place", "vllm/distributed/parallel_state.py"),
    ("all_reduce", "vllm/distributed/parallel_state.py"),
    ("GroupCoordinator.all_reduce", "vllm/distributed/parallel_state.py"),
    ("tensor_model_parallel_all_reduce", "vllm/distributed/communication_op.py"),
    ("RowParallelLinear.forward", "vllm/model_executor/layers/linear.py"),
    ("LlamaForCausalLM.forward", "vllm/model_executor/models/llama.py"),
    ("Module._call_impl", "torch/nn/modules/module.py"),
    ("GPUModelRunner._model_forward", RUNNER),
    ("GPUModelRunner.execute_model", RUNNER),
    ("Worker.execute_model", "vllm/v1/worker/gpu_worker.py"),
    *RPC,
]
FORWARD = [fr for fr in FORWARD_ALL_REDUCE if "all_reduce" not in fr[0]]
SAMPLING = [
    ("RejectionSampler.forward", "vllm/v1/sample/rejection_sampler.py"),
    ("Module._call_impl", "torch/nn/modules/module.py"),
    ("GPUModelRunner._sample", RUNNER),
    ("GPUModelRunner.sample_tokens", RUNNER),
    ("Worker.sample_tokens", "vllm/v1/worker/gpu_worker.py"),
    *RPC,
]
DRAFTING = [
    ("NgramProposer.propose", "vllm/v1/spec_decode/ngram_proposer.py"),
    ("GPUModelRunner.propose_draft_token_ids", RUNNER),
    ("GPUModelRunner.sample_tokens.<locals>.propose_draft_token_ids", RUNNER),
    ("GPUModelRunner.sample_tokens", RUNNER),
    ("Worker.sample_tokens", "vllm/v1/worker/gpu_worker.py"),
    *RPC,
]
CORE_WAITING = [
    ("SpinCondition.wait", SHM),
    ("MessageQueue.acquire_read", SHM),
    ("_GeneratorContextManager.__enter__", "contextlib.py"),
    ("MessageQueue.dequeue", SHM),
    ("MultiprocExecutor.collective_rpc.<locals>.get_response", EXECUTOR),
    ("FutureWrapper._wait_for_response", EXECUTOR),
    ("FutureWrapper.result", EXECUTOR),
    ("EngineCore.step", "vllm/v1/engine/core.py"),
    ("EngineCoreProc._process_engine_step", "vllm/v1/engine/core.py"),
    ("EngineCoreProc.run_busy_loop", "vllm/v1/engine/core.py"),
    ("run_engine_core", "vllm/v1/engine/core.py"),
    *SPAWN,
]


def py_spy_json(pid: int, frames: list[tuple[str, str]]) -> str:
    """What `py-spy dump --json --pid PID` prints: the main thread, and a helper thread beside it."""
    main = {
        "pid": pid,
        "thread_id": 140000000000 + pid,
        "thread_name": "MainThread",
        "os_thread_id": pid,
        "active": False,
        "owns_gil": False,
        "frames": [
            {
                "name": name,
                "filename": f"/venv/lib/python3.11/site-packages/{file}",
                "module": None,
                "short_filename": file,
                "line": 100 + i,
                "locals": None,
                "is_entry": i == len(frames) - 1,
            }
            for i, (name, file) in enumerate(frames)
        ],
    }
    helper = {**main, "thread_name": "WorkerAsyncOutput", "os_thread_id": pid + 1, "frames": []}
    return json.dumps([helper, main])


def read(pid: int, title: str, frames: list[tuple[str, str]], rank: int | None) -> Worker:
    """A process as core.stacks.collect reads it: its title's role and label, its py-spy dump parsed on the box."""
    ident = identify(title)
    w = Worker(pid, rank, title, role=ident.role, label=ident.label)
    w.frames = main_frames(box_stacks._threads(py_spy_json(pid, frames), pid))
    return w


def names(frames: list[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"name": n, "file": f} for n, f in frames]


def test_an_idle_tp2_server_reads_idle_and_the_engine_core_is_no_rank():
    ws = [
        read(10, "VLLM::EngineCore", IDLE_CORE, None),
        read(11, "VLLM::Worker_TP0", IDLE_WORKER, 0),
        read(12, "VLLM::Worker_TP1", IDLE_WORKER, 1),
    ]
    groups = group_workers(ws, "vllm")
    assert [(g.role, g.ranks, g.differs) for g in groups] == [
        (WORKER, [0, 1], False),
        (ENGINE_CORE, [], False),
    ]
    assert groups[0].labels == ["TP0", "TP1"]
    assert [g.phase for g in groups] == ["idle (waiting for work)"] * 2
    assert summary(groups) == (
        "workers: all 2 rank(s) in the same stack: idle (waiting for work); engine core: idle (waiting for work)"
    )
    d = {
        "profile": "p",
        "found_by": "x",
        "summary": summary(groups),
        "workers": [{"role": w.role} for w in ws],
        "groups": [g.__dict__ for g in groups],
        "errors": {},
    }
    lines = dump_lines(d)
    assert lines[0].startswith("p: 2 worker(s), 1 engine core (x)")
    assert "ranks 0, 1 = TP0, TP1 (pids 11, 12): idle (waiting for work)" in lines
    assert "engine core (pids 10): idle (waiting for work)" in lines
    assert not any("differs" in line for line in lines)


def test_busy_worker_states_are_named_from_real_frames():
    assert phase_of(names(FORWARD_ALL_REDUCE), "vllm") == "in a collective: CpuCommunicator.all_reduce"
    assert phase_of(names(FORWARD), "vllm") == "in the forward pass: GPUModelRunner._model_forward"
    assert phase_of(names(SAMPLING), "vllm") == "in sampling: RejectionSampler.forward"
    assert phase_of(names(DRAFTING), "vllm") == "in the drafter: NgramProposer.propose"
    assert phase_of(names(CORE_WAITING), "vllm") == "waiting for the workers' output"
    loading = [("DefaultModelLoader.load_weights", "x.py"), ("GPUModelRunner.load_model", RUNNER), *RPC]
    assert phase_of(names(loading), "vllm") == "startup: loading weights"
    other_rpc = [("Worker.check_health", "vllm/v1/worker/gpu_worker.py"), *RPC]
    assert phase_of(names(other_rpc), "vllm") == "in an RPC from the engine core"


def test_one_worker_stuck_in_forward_differs_from_its_peers_in_the_all_reduce():
    ws = [read(10, "VLLM::EngineCore", CORE_WAITING, None)]
    ws += [
        read(11 + r, f"VLLM::Worker_TP{r}", FORWARD if r == 2 else FORWARD_ALL_REDUCE, r) for r in range(4)
    ]
    groups = group_workers(ws, "vllm")
    assert [(g.role, g.ranks, g.differs) for g in groups] == [
        (WORKER, [0, 1, 3], False),
        (WORKER, [2], True),
        (ENGINE_CORE, [], False),
    ]
    assert summary(groups) == (
        "workers: 3 ranks: in a collective: CpuCommunicator.all_reduce; rank 2 differs: in the forward pass: "
        "GPUModelRunner._model_forward, "
        "in RowParallelLinear.forward; engine core: waiting for the workers' output"
    )


def test_titles_name_roles_and_ranks_as_vllm_writes_them():
    assert identify("VLLM::EngineCore").role == ENGINE_CORE
    core = identify("VLLM::EngineCore_DP1")
    assert (core.role, core.axes, core.label) == (ENGINE_CORE, {"DP": 1}, "DP1")
    assert identify("python -m vllm.entrypoints.openai.api_server --model m").role == API_SERVER
    assert identify("/v/bin/python3 /v/bin/vllm serve m --port 8000").role == API_SERVER
    assert identify("VLLM::APIServer_0").role == API_SERVER
    assert identify("VLLM::Worker_DP0_TP1").axes == {"DP": 0, "TP": 1}
    assert identify("VLLM::Worker_TP0_EP0").label == "TP0_EP0"
    plain = identify("VLLM::Worker")
    assert (plain.role, plain.axes, plain.known) == (WORKER, {}, True)
    assert identify("sglang::scheduler_TP5").axes == {"TP": 5}
    titles = ["VLLM::EngineCore", *(f"VLLM::Worker_PP{p}_TP{t}" for p in (0, 1) for t in (0, 1))]
    assert worker_ranks([identify(t) for t in titles]) == [None, 0, 1, 2, 3]
    second_node = [identify(f"VLLM::Worker_TP{t}") for t in (4, 5)]
    assert worker_ranks(second_node) == [4, 5]
    assert worker_ranks([identify("python3 x.py"), identify("python3 y.py")]) == [0, 1]


def test_sglang_frames_still_read_as_before():
    wait = [{"name": n, "file": "s.py"} for n in ("pynccl_all_reduce", "all_reduce", "event_loop_normal")]
    assert phase_of(wait, "sglang") == "NCCL collective wait"
    assert phase_of([{"name": "recv_requests"}, {"name": "event_loop_normal"}], "sglang").startswith("idle")
    assert phase_of(names(IDLE_WORKER), "sglang").startswith("cannot tell")
