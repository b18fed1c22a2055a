"""Identical stacks grouped across ranks, and the phase a stack is in, named from its frames.

Why group: a distributed hang is usually N-1 ranks waiting in a collective for the one that is
behind; eight stacks printed one after another hide that, two groups ("7 ranks: all_reduce",
"rank 3: forward_decode -> synchronize") show it.  The phase comes from the function names on the
main thread (the engines' `stack_phases`: SGLang's, which the sim's frames copy); no known name gives
"cannot tell".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from specdebug.engines import ENGINES

# (phase, any of these function names on the main thread), first match wins: a collective wait (torch /
# NCCL, every engine) before the engines' own function names (`Engine.stack_phases`)
PHASE_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "NCCL collective wait",
        ("all_reduce", "pynccl_all_reduce", "all_gather", "broadcast", "barrier", "wait_for_peers"),
    ),
    *(rule for engine in ENGINES.values() for rule in engine.stack_phases),
)
RANK = re.compile(r"(?:TP|_TP|Worker_TP)(\d+)")


def short_name(name: str) -> str:
    """`CudaGraphRunner.replay` -> `replay` (py-spy prefixes methods with their class)."""
    return name.rsplit(".", 1)[-1]


def phase_of(frames: list[dict[str, Any]]) -> str:
    names = {short_name(str(f.get("name"))) for f in frames}
    for phase, wanted in PHASE_RULES:
        if names.intersection(wanted):
            return phase
    return "cannot tell (no known frame)"


def main_frames(dump: dict[str, Any]) -> list[dict[str, Any]]:
    """The main thread's frames, leaf first (py-spy's order); [] when the dump has none."""
    threads = dump.get("threads") or []
    main = next((t for t in threads if t.get("main")), threads[0] if threads else None)
    return list(main.get("frames") or []) if main else []


def rank_of(title: str, index: int) -> int:
    m = RANK.search(title)
    return int(m.group(1)) if m else index


@dataclass
class Worker:
    pid: int
    rank: int
    title: str
    frames: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    phase: str = "cannot tell"
    group: int | None = None


@dataclass
class Group:
    id: int
    ranks: list[int]
    pids: list[int]
    phase: str
    frames: list[dict[str, Any]]
    differs: bool = False


def signature(frames: list[dict[str, Any]]) -> tuple[tuple[str, str], ...]:
    """Function and file of every frame: line numbers left out (one loop, two lines, one place)."""
    return tuple((str(f.get("name")), str(f.get("file"))) for f in frames)


def group_workers(workers: list[Worker]) -> list[Group]:
    """Groups of identical main-thread stacks, biggest first; all but the biggest are `differs`
    (a tie between the two biggest: every group differs, no majority to hold a rank against)."""
    by_sig: dict[tuple[tuple[str, str], ...], list[Worker]] = {}
    for w in workers:
        if w.error is None:
            w.phase = phase_of(w.frames)
            by_sig.setdefault(signature(w.frames), []).append(w)
    ordered = sorted(by_sig.values(), key=lambda ws: (-len(ws), min(x.rank for x in ws)))
    groups = []
    for i, ws in enumerate(ordered):
        ws.sort(key=lambda x: x.rank)
        for w in ws:
            w.group = i + 1
        groups.append(Group(i + 1, [w.rank for w in ws], [w.pid for w in ws], ws[0].phase, ws[0].frames))
    if len(groups) > 1:
        tie = len(groups[0].ranks) == len(groups[1].ranks)
        for g in groups[0 if tie else 1 :]:
            g.differs = True
    return groups


def _leaf(g: Group) -> str:
    """The innermost Python frame of a group's stack (py-spy lists the leaf first)."""
    return short_name(str(g.frames[0].get("name"))) if g.frames else "?"


def summary(groups: list[Group]) -> str:
    """One line: the server's phase and the ranks that differ."""
    if not groups:
        return "cannot tell: no stack was read"
    head = groups[0]

    def ranks(g: Group) -> str:
        return ", ".join(str(r) for r in g.ranks)

    if len(groups) == 1:
        return f"all {len(head.ranks)} rank(s) in the same stack: {head.phase}"
    if not head.differs:
        diff = "; ".join(f"rank {ranks(g)} differs: {g.phase}, in {_leaf(g)}" for g in groups[1:])
        return f"{len(head.ranks)} ranks: {head.phase}; {diff}"
    return "no majority: " + "; ".join(f"rank {ranks(g)}: {g.phase}" for g in groups)


def dump_lines(d: dict[str, Any]) -> list[str]:
    """Human lines of a dump (core.stacks.collect.dump's dict): the verb prints them, the TUI shows them."""
    out = [f"{d['profile']}: {len(d['workers'])} worker(s) ({d['found_by']}); {d['summary']}"]
    for g in d["groups"]:
        mark = "  <- differs" if g["differs"] else ""
        out.append(
            f"ranks {', '.join(map(str, g['ranks']))} (pids {', '.join(map(str, g['pids']))}): {g['phase']}{mark}"
        )
        out += [f"    {f['name']} ({f['file']}:{f['line']})" for f in g["frames"][:25]]
    out += [f"pid {pid}: no stack: {e}" for pid, e in d["errors"].items()]
    return out
