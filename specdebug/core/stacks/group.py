"""Identical stacks grouped across ranks, and the phase a stack is in, named from its frames.

Why group: a distributed hang is usually N-1 ranks waiting in a collective for the one that is
behind; eight stacks printed one after another hide that, two groups ("7 ranks: all_reduce",
"rank 3: forward_decode -> synchronize") show it.  Only like is compared with like: a vLLM engine
core or API server is no rank (core.stacks.roles), its stack is grouped with its own role's.  The
phase comes from the function names on the main thread (the engine's `stack_phases`: SGLang's, which
the sim's frames copy, and vLLM's, read from its source); no known name gives "cannot tell".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from specdebug.core.stacks.roles import RANKED_ROLES, SGLANG_RANK, WORKER
from specdebug.engines import ENGINES, engine_of

Rules = tuple[tuple[str, tuple[str, ...]], ...]
# a collective wait (torch / NCCL): before an engine's own names, unless the engine names its collectives
COLLECTIVE_RULE = (
    "NCCL collective wait",
    ("all_reduce", "pynccl_all_reduce", "all_gather", "broadcast", "barrier", "wait_for_peers"),
)
# (phase, any of these function names on the main thread), first match wins: every engine's rules,
# for a stack whose engine is not known
PHASE_RULES: Rules = (COLLECTIVE_RULE, *(rule for engine in ENGINES.values() for rule in engine.stack_phases))
RANK = SGLANG_RANK


def rules_for(kind: str | None) -> Rules:
    """The rules of one engine (a profile's kind): its own, after the generic collective rule unless
    one of its own rules names all_reduce (vLLM places its collectives itself); every engine's when
    the kind has none."""
    engine = engine_of(kind)
    if engine is None or not engine.stack_phases:
        return PHASE_RULES
    own = engine.stack_phases
    if any("all_reduce" in names for _, names in own):
        return own
    return (COLLECTIVE_RULE, *own)


def short_name(name: str) -> str:
    """`CudaGraphRunner.replay` -> `replay` (py-spy prefixes methods with their class)."""
    return name.rsplit(".", 1)[-1]


def _matches(name: str, wanted: str) -> bool:
    """`Sampler.forward` matches `Sampler.forward` and `X.Sampler.forward`; `propose` matches the
    last part of any qualname (`NgramProposer.propose`)."""
    if "." in wanted:
        return name == wanted or name.endswith("." + wanted)
    return short_name(name) == wanted


def phase_of(frames: list[dict[str, Any]], kind: str | None = None) -> str:
    """The first rule whose names a frame holds; `{name}` in a phase becomes the innermost frame
    that matched, as py-spy names it (`CpuCommunicator.all_reduce`, `NgramProposer.propose`)."""
    names = [str(f.get("name")) for f in frames]
    for phase, wanted in rules_for(kind):
        hit = next((n for n in names if any(_matches(n, w) for w in wanted)), None)
        if hit is not None:
            return phase.replace("{name}", hit)
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
    """One process of the server whose stack is read (a worker, or the engine core: see `role`)."""

    pid: int
    rank: int | None  # None: not a rank (an engine core, an API server)
    title: str
    frames: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    phase: str = "cannot tell"
    group: int | None = None
    role: str = WORKER
    label: str = ""  # what its title names: "TP1", "PP0_TP1", "DP0"; "" when nothing


@dataclass
class Group:
    id: int
    ranks: list[int]
    pids: list[int]
    phase: str
    frames: list[dict[str, Any]]
    differs: bool = False
    role: str = WORKER
    labels: list[str] = field(default_factory=list)


def signature(frames: list[dict[str, Any]]) -> tuple[tuple[str, str], ...]:
    """Function and file of every frame: line numbers left out (one loop, two lines, one place)."""
    return tuple((str(f.get("name")), str(f.get("file"))) for f in frames)


def _order(w: Worker) -> tuple[int, int]:
    return (w.rank if w.rank is not None else -1, w.pid)


def group_workers(workers: list[Worker], kind: str | None = None) -> list[Group]:
    """Groups of identical main-thread stacks within each role, the ranked role's first, biggest
    first; in each role all but its biggest group are `differs` (a tie between its two biggest: every
    group of the role differs, no majority to hold a rank against).  A lone engine core is never
    held against the workers."""
    by_sig: dict[tuple[str, tuple[tuple[str, str], ...]], list[Worker]] = {}
    for w in workers:
        if w.error is None:
            w.phase = phase_of(w.frames, kind)
            by_sig.setdefault((w.role, signature(w.frames)), []).append(w)
    roles = sorted({role for role, _ in by_sig}, key=lambda r: (r not in RANKED_ROLES, r))
    groups: list[Group] = []
    for role in roles:
        ordered = sorted(
            (ws for (r, _), ws in by_sig.items() if r == role),
            key=lambda ws: (-len(ws), min(_order(x) for x in ws)),
        )
        mine: list[Group] = []
        for ws in ordered:
            ws.sort(key=_order)
            gid = len(groups) + len(mine) + 1
            for w in ws:
                w.group = gid
            ranks = [w.rank for w in ws if w.rank is not None]
            labels = [w.label for w in ws if w.label]
            mine.append(
                Group(gid, ranks, [w.pid for w in ws], ws[0].phase, ws[0].frames, False, role, labels)
            )
        if len(mine) > 1:
            tie = len(mine[0].pids) == len(mine[1].pids)
            for g in mine[0 if tie else 1 :]:
                g.differs = True
        groups += mine
    return groups


def _leaf(g: Group) -> str:
    """The innermost Python frame of a group's stack, as py-spy names it (the leaf comes first)."""
    return str(g.frames[0].get("name")) if g.frames else "?"


def _who(g: Group) -> str:
    """`rank 0, 1` for a ranked role; `engine core`, `engine core DP1` for the others."""
    if g.role in RANKED_ROLES:
        return "rank " + ", ".join(str(r) for r in g.ranks)
    return " ".join([g.role, ", ".join(g.labels)]).strip()


def _role_summary(gs: list[Group]) -> str:
    """One role's groups in words: the phase they share, or the majority and the groups that differ."""
    head = gs[0]
    ranked = head.role in RANKED_ROLES
    count = len(head.ranks) if ranked else len(head.pids)
    if len(gs) == 1:
        if not ranked and count == 1:
            return f"{_who(head)}: {head.phase}"
        what = "rank(s)" if ranked else f"{head.role}s"
        return f"all {count} {what} in the same stack: {head.phase}"
    if not head.differs:
        diff = "; ".join(f"{_who(g)} differs: {g.phase}, in {_leaf(g)}" for g in gs[1:])
        what = "ranks" if ranked else f"{head.role}s"
        return f"{count} {what}: {head.phase}; {diff}"
    return "no majority: " + "; ".join(f"{_who(g)}: {g.phase}" for g in gs)


def summary(groups: list[Group]) -> str:
    """One line: each role's phase and the ranks that differ (the workers first, then the engine
    core, the API server; a server of ranks only reads as before: "8 ranks: ...")."""
    if not groups:
        return "cannot tell: no stack was read"
    roles = list(dict.fromkeys(g.role for g in groups))
    parts = []
    for role in roles:
        text = _role_summary([g for g in groups if g.role == role])
        prefix = "workers: " if role in RANKED_ROLES and len(roles) > 1 else ""
        parts.append(prefix + text)
    return "; ".join(parts)


def _counted(workers: list[dict[str, Any]]) -> str:
    """`2 worker(s)`, or `2 worker(s), 1 engine core` when other roles were read too."""
    roles: dict[str, int] = {}
    for w in workers:
        role = w.get("role", WORKER)
        roles[role] = roles.get(role, 0) + 1
    head = f"{roles.pop(WORKER, 0)} worker(s)"
    return ", ".join([head, *(f"{n} {role}" for role, n in roles.items())])


def dump_lines(d: dict[str, Any]) -> list[str]:
    """Human lines of a dump (core.stacks.collect.dump's dict): the verb prints them, the TUI shows them."""
    out = [f"{d['profile']}: {_counted(d['workers'])} ({d['found_by']}); {d['summary']}"]
    for g in d["groups"]:
        mark = "  <- differs" if g["differs"] else ""
        pids = ", ".join(map(str, g["pids"]))
        if g.get("role", WORKER) in RANKED_ROLES:
            names = f" = {', '.join(g['labels'])}" if g.get("labels") else ""
            who = f"ranks {', '.join(map(str, g['ranks']))}{names}"
        else:
            who = " ".join([g["role"], ", ".join(g.get("labels") or [])]).strip()
        out.append(f"{who} (pids {pids}): {g['phase']}{mark}")
        out += [f"    {f['name']} ({f['file']}:{f['line']})" for f in g["frames"][:25]]
    out += [f"pid {pid}: no stack: {e}" for pid, e in d["errors"].items()]
    return out
