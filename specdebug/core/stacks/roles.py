"""Which part of a server a process is (its role) and, for a worker only, its rank: from its title.

Why: a vLLM server's processes are not all ranks.  The engine core (`VLLM::EngineCore`, schedules and
waits for its workers) and the API server are one each per engine; the workers (`VLLM::Worker_TP0`)
are the ranks.  Counting the engine core as "rank 0" beside TP rank 0 compared an idle scheduler's
stack with a worker's and marked it "differs" (issue 37).  Grouping compares like with like.

vLLM's titles (0.32.0 and 0.34.0, utils/system_utils.set_process_title: `{VLLM_PROCESS_NAME_PREFIX,
default VLLM}::{name}`): v1/executor/multiproc_executor.py setup_proc_title_and_log_prefix names a
worker `Worker` + `_DP{d}` (dp > 1) + `_PP{p}` + `_PCP{c}` + `_TP{t}` + `_DCP{k}` (each when its size
is > 1) + `_EP{e}` (expert parallel), plain `Worker` before the groups exist (and at TP 1); v1/engine/
core.py run_engine_core names `EngineCore` or `EngineCore_DP{d}`; v1/utils.py `APIServer_{i}`
(api-server-count > 1), entrypoints/launchers/dp_supervisor.py `APIServer_DP{d}`; v1/engine/
coordinator.py `DPCoordinator`.  A lone API server keeps its command line (`python -m
vllm.entrypoints.openai.api_server ...`, `vllm serve ...`).  SGLang's `sglang::scheduler_TP{t}` are
its ranks (the scheduler runs the model).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from specdebug.engines.vllm import API_SERVER_CMDLINE

WORKER = "worker"
ENGINE_CORE = "engine core"
API_SERVER = "API server"
DP_COORDINATOR = "DP coordinator"
RANKED_ROLES = (WORKER,)

VLLM_TITLE = re.compile(
    r"(?:^|\s)[\w.-]+::(?P<name>Worker|EngineCore|APIServer|DPCoordinator|DPEngineCoreActor)(?P<suffix>[\w]*)"
)
VLLM_AXES = ("DP", "PP", "PCP", "TP", "DCP", "EP")
AXIS = re.compile(r"_(DP|PP|PCP|TP|DCP|EP)(\d+)")
ROLE_OF_NAME = {
    "Worker": WORKER,
    "EngineCore": ENGINE_CORE,
    "DPEngineCoreActor": ENGINE_CORE,
    "APIServer": API_SERVER,
    "DPCoordinator": DP_COORDINATOR,
}
SGLANG_RANK = re.compile(r"(?:TP|_TP|Worker_TP)(\d+)")


@dataclass
class Identity:
    """What a title says: role, the parallel ranks it names ({"TP": 1}), and a short label."""

    role: str
    axes: dict[str, int] = field(default_factory=dict)
    label: str = ""
    known: bool = True  # False: nothing in the title told (a worker, ranked by its place in the list)


def identify(title: str) -> Identity:
    """The role and parallel ranks a process title (or command line) names."""
    m = VLLM_TITLE.search(title)
    if m:
        role = ROLE_OF_NAME[m.group("name")]
        axes = {axis: int(n) for axis, n in AXIS.findall(m.group("suffix"))}
        suffix = m.group("suffix").lstrip("_")
        return Identity(role, axes, suffix)
    if API_SERVER_CMDLINE.search(title):
        return Identity(API_SERVER)
    m = SGLANG_RANK.search(title)
    if m:  # no label: its rank is its TP rank, shown as before (`ranks 0, 2, 3`)
        return Identity(WORKER, {"TP": int(m.group(1))})
    return Identity(WORKER, known=False)


def worker_ranks(identities: list[Identity]) -> list[int | None]:
    """A rank for every worker, None for the other roles.

    A worker's rank orders the workers as vLLM's global rank within one DP engine does (PP outer, TP
    inner: pp * tp_size + tp), DP before them, with each axis's size taken from the highest rank seen
    among these titles; a title with only a TP rank keeps that rank (TP 4-7 on a second node stay
    4-7).  A worker whose title names nothing takes its place in the list, as before.
    """
    sizes = {
        axis: max((i.axes.get(axis, 0) for i in identities if i.role == WORKER), default=0) + 1
        for axis in VLLM_AXES
        if axis != "EP"
    }
    out: list[int | None] = []
    for index, ident in enumerate(identities):
        if ident.role != WORKER:
            out.append(None)
        elif not ident.known:
            out.append(index)
        else:
            rank = 0
            for axis, size in sizes.items():
                rank = rank * size + ident.axes.get(axis, 0)
            out.append(rank)
    return out
