"""The Engine protocol: everything specdebug knows about one server engine, behind one interface.

Why an adapter: SGLang and vLLM differ in their log lines, startup phases, ready line, worker process
titles, what they do to their workers' environment, their /metrics names and what those mean per
version, the output of their benchmark clients, and how a server spanning several nodes is launched.
Services ask the engine (`specdebug.engines.get_engine(kind)`) instead of comparing the kind with a
name, so a third engine is one new module here and an entry in the registry.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from specdebug.engines.envrules import EnvRule
from specdebug.engines.pack import Pack


@dataclass(frozen=True)
class PromNames:
    """Which /metrics series mean what for one engine (shared/formats/current-sources.md).

    `spec_from` says how the speculative figures are exported: as gauges of the last log interval
    (read as they are) or as counters (rates over a window).  Each field is a metric name or a
    tuple of names, the first present wins; "" means the engine does not export it.
    """

    prefix: str  # every metric of the engine starts with it: how a page names its engine
    spec_from: Literal["gauges", "counters"]
    off_hint: str  # what to tell the user when the server serves no /metrics
    enable_flag: str = ""  # the server flag that turns /metrics on ("": always on)
    # counters style: the exported accept rate already is specdebug's own definition; this names why
    accept_rate_is_own: str = ""
    # gauges read as they are: (PromRates field, metric names) in the order the rates show them
    gauges: tuple[tuple[str, tuple[str, ...]], ...] = ()
    accept_length: str = ""  # gauge (gauges style)
    accept_rate: str = ""  # gauge (gauges style)
    num_draft_tokens: str = ""  # gauge: the live --speculative-num-draft-tokens
    verify_calls: str = ""  # counter
    generation_tokens: str = ""  # counter
    gen_throughput: str = ""  # gauge, when the counter is missing
    drafts: str = ""  # counter (counters style)
    draft_tokens: str = ""  # counter
    accepted_tokens: str = ""  # counter
    accepted_per_pos: str = ""  # counter with a `position` label
    mean_names: frozenset[str] = frozenset()  # settings every DP rank reports alike: averaged, not summed
    # the label that names a data-parallel rank (vLLM: `engine`, SGLang: `dp_rank`); the DP ranks are
    # its distinct values, never the number of series of one metric (reasons, positions, states)
    dp_label: str = ""
    own_rate_source: str = ""  # how specdebug's own rate is computed from these gauges, named
    # live settings exported as gauges: (PromRates field, label, the launch flag they should match)
    settings: tuple[tuple[str, str, str], ...] = ()


@dataclass(frozen=True)
class BenchDialect:
    """How the engine's own benchmark client prints and saves its results (`bench --parse`).

    Both clients print the same framed block (core.bench.external parses it); which client wrote a
    block is told by keys only one of them prints.
    """

    tool: str  # the command the user ran, for messages
    block_keys: tuple[str, ...]  # lowercased keys of a printed block that only this client writes
    latency_word: str  # the end-to-end latency's name in its latency lines
    order: int  # lower is asked first (the more specific keys first)
    saved_flag: str  # the client's flag that saves the result as JSON
    writes_spec_decode: bool = False  # its saved JSON has the `spec_decode_*` keys
    # what one of the server's own stats log lines covers (bench names the window of each log figure):
    # the whole server (every stream together), over this interval, which may only partly overlap a run
    log_interval: str = ""

    def claims_block(self, keys: set[str]) -> bool:
        return any(k in keys for k in self.block_keys) or any(self.latency_word in k for k in keys)


EngineName = Literal["sglang", "vllm"]  # the profile kinds with an engine (the registry's keys)
# (speculative?, tokens verified per cycle, topk, which flags said so): what a launch argv says
SpecShape = tuple[bool, int | None, int | None, str]
NO_SPEC = ("", "none", "null")  # an algorithm flag with one of these values turns speculation off


def int_flag(values: Sequence[str] | None) -> int | None:
    """The first value of a split flag as an int, None when absent or not a number."""
    try:
        return int(values[0]) if values else None
    except ValueError:
        return None


def check_node(nnodes: int, rank: int, leader_addr: str, port: int) -> None:
    """ValueError unless this is one node of a valid group: 0 <= rank < nnodes, a port, an address
    that cannot pass for a flag (it lands in argv)."""
    if nnodes < 1 or not 0 <= rank < nnodes:
        raise ValueError(f"node rank {rank} is outside a group of {nnodes} nodes")
    if not 0 < port < 65536:
        raise ValueError(f"port {port} is outside 1-65535")
    if not leader_addr or leader_addr.startswith("-") or any(c.isspace() for c in leader_addr):
        raise ValueError(f"leader address {leader_addr!r} is empty, starts with '-' or has spaces")


class Engine(Protocol):
    """One server engine.  Every attribute is data or a pure function: no I/O here."""

    name: EngineName  # the profile's `kind`
    title: str  # how people write it ("SGLang")
    package: str  # its Python distribution (what `drift` reads the version of)
    pack: Pack  # the log pattern pack
    phases: tuple[str, ...]  # startup checklist the startup pane shows, "launch" first, "ready" last
    ready_line: str  # the log line that says the server is ready (the pack's ready_re matches it)
    worker_titles: tuple[str, ...]  # process-title prefixes of its workers (in /proc/PID/cmdline)
    worker_match: str  # default regex over cmdlines that picks its worker processes
    env_prefixes: tuple[str, ...]  # its own environment variables start with these
    default_port: int
    version_paths: tuple[str, ...]  # HTTP paths that answer {"version": ...}
    prom: PromNames
    bench: BenchDialect
    detect: tuple[tuple[int, re.Pattern[str]], ...]  # (weight, regex): evidence a log line gives for it
    accept_rate_meanings: Mapping[str, str]  # printed accept-rate definition -> what it means
    # (phase, function names): a py-spy stack whose main thread holds one of them is in that phase
    stack_phases: tuple[tuple[str, tuple[str, ...]], ...]
    spec_switch: str  # the launch flag that turns speculative decoding on

    def spec_shape(self, flags: Mapping[str, list[str]]) -> SpecShape | None:
        """What its speculative launch flags say (split flags: name -> values); None without its switch."""
        ...

    def spec_method(self, flags: Mapping[str, list[str]]) -> str:
        """Its speculative method (and draft model) from the split flags: configs of one method share
        acceptance (the speculation advisor, core.spec.advise, only mixes those)."""
        ...

    def spec_depth_flags(self, flags: Mapping[str, list[str]], depth: int) -> list[tuple[str, list[str]]]:
        """The flags that set `depth` drafts per cycle, topk kept (the advisor's candidates, `spec --try`)."""
        ...

    def env_rules(self, version: str | None, argv: Sequence[str] = ()) -> dict[str, EnvRule]:
        """What the server does to its workers' environment, for this version and argv."""
        ...

    def claims_saved(self, obj: Mapping[str, Any]) -> bool:
        """A saved benchmark JSON written by this engine's client."""
        ...

    def node_args(self, nnodes: int, rank: int, leader_addr: str, port: int) -> list[str]:
        """The arguments that place one node of a server spanning `nnodes` nodes."""
        ...
