"""Warnings from the conditions around one benchmark run (core.bench.runner): the server's state
before it, the GPUs before and after it (every node's, in a deployment, each naming its node), and
the server log during it.  A result carries them so a number is never read without its caveats.
"""

from __future__ import annotations

from typing import Any

from specdebug.core.bench import gpu
from specdebug.core.bench.models import NodeGpus
from specdebug.core.bench.serverstate import ServerState


def run_warnings(
    state: ServerState,
    before: list[Any],
    after: list[Any],
    gpu_err: str | None,
    log_errors: list[str],
    size_before: int | None,
    size_after: int | None,
    node: str | None = None,
) -> list[str]:
    """What the conditions around the run say about its figures: a server not ready yet, no version,
    GPUs that throttled or changed, no GPU state, a server log that cannot be read or shrank, error
    lines in it.  `node`: the node the GPUs are on, in a deployment."""
    out: list[str] = []
    if state.health_status != 200:
        out.append(f"server not ready: health answered HTTP {state.health_status} (still in warmup?)")
    if state.ready_line is False:
        out.append("server not ready: no ready line in the log yet (still in warmup?)")
    if state.version_note:
        out.append(f"server version unknown: {state.version_note}")
    out += gpu.gpu_warnings(before, after, node)
    if gpu_err:
        out.append(f"no GPU state{f' on {node}' if node else ''}: {gpu_err}")
    if size_before is None:
        out.append("server log not readable: no server-side metrics")
    elif size_after is not None and size_after < size_before:
        out.append("server log shrank during the run (truncated or rotated): no server-side metrics")
    if log_errors:
        out.append(f"{len(log_errors)} error line(s) in the server log during the run: {log_errors[0]}")
    return out


def node_warnings(by_node: dict[str, NodeGpus], leader: str | None) -> list[str]:
    """The other nodes' GPU warnings (the leader's are run_warnings'), each naming its node."""
    out: list[str] = []
    for h, g in by_node.items():
        if h == leader:
            continue
        out += gpu.gpu_warnings(g.before, g.after, h)
        if g.error:
            out.append(f"no GPU state on {h}: {g.error}")
    return out
