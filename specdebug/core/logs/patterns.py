"""Pattern packs for SGLang and vLLM logs: batch/stats lines, milestones, ready and error lines.

Why key/value tails instead of one regex per line shape: both servers keep adding, removing and
reordering fields ("accept rate" appeared mid-2025, PD servers add four more, vLLM renamed its spec
line three times). We anchor on the line's head ("Decode batch", "SpecDecoding metrics: ") and split
the rest on ", " into `key: value` pairs; every pair lands in `fields` under a normalised key, and a
small per-pack map picks the metrics. A new field therefore never breaks the old ones.

Milestone, ready and error patterns are plain data (`Pack.milestones`, `Pack.errors`) so the startup
watcher can reuse them; `Pack.phase_of`, `is_ready`, `is_error`, `error_kind` are the pure helpers.
Formats: shared/formats/serving-formats.md (SGLang 1.1-1.4, vLLM 2.1-2.4, NCCL 4.2).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
# docker compose "svc  | " and Ray / vLLM process tags "(Worker_TP0 pid=12) " (possibly nested)
WRAPPER_RE = re.compile(r"^(?:[\w.\-]+\s+\|\s)?(?:\([^()]*pid=\d+\)\s+)*")
# SGLang: "[2025-10-22 10:27:57 DP0 TP0] " ; very old "[gpu_id=0] "
SGLANG_PREFIX_RE = re.compile(
    r"^\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?P<ranks>(?: [A-Z]+\d+)*)\] |^\[gpu_id=(?P<gpu>\d+)\] "
)
# SGLang dictConfig: "2025-10-20 03:02:22 INFO 31223 [DP3 TP3 EP3 scheduler_metrics_mixin.py:222] "
SGLANG_DICT_PREFIX_RE = re.compile(
    r"^(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (?P<level>[A-Z]+) \d+ \[(?P<ranks>(?:[A-Z]+\d+ )*)[^\]\s]+:\d+\] "
)
# vLLM: "INFO 05-04 01:06:43 [metrics.py:101] " ; 2024: "INFO 11-03 15:47:45 model_runner.py:1671] "
VLLM_PREFIX_RE = re.compile(
    r"^(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<ts>\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)? \[?[^\]\s]+:\d+\] "
)
NCCL_ENV_RE = re.compile(
    r"(?P<host>[^\s:]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<rank>\d+)\] NCCL INFO "
    r"(?P<name>[A-Z][A-Z0-9_]*) set by environment to (?P<value>.*?)\s*$"
)
NUM_RE = re.compile(
    r"^(?P<num>[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|nan|inf|-inf)\s*(?P<unit>\S.*)?$"
)
_GENERIC_EXC = r"^(?:[A-Za-z_][\w.]*\.)?[A-Za-z_]\w*(?:Error|Exception)(?::|$)"
_TRACE_CONT = re.compile(r"^(?:\s|Traceback \(most recent call last\)|File \")")
_MILESTONE_NUM_RE = re.compile(
    r"(#?[A-Za-z_][\w-]*(?: [A-Za-z_][\w-]*)*)\s*[=:] ?(-?\d+(?:\.\d+)?)(?=[\s,.)]|$)"
)


@dataclass
class Parsed:
    """What a pack made of one message (positions relative to the cleaned line)."""

    event: str
    fields: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, float | list[float]] = field(default_factory=dict)
    spans: list[tuple[int, int, str]] = field(default_factory=list)
    phase: str | None = None
    also: list[str] = field(default_factory=list)


@lru_cache(maxsize=1024)
def norm_key(key: str) -> str:
    """'#running-req' -> running_req, 'gen throughput (token/s)' -> gen_throughput."""
    key = re.sub(r"\([^)]*\)", "", key).strip().lstrip("#").lower()
    return re.sub(r"[^a-z0-9]+", "_", key).strip("_")


def parse_value(text: str) -> tuple[Any, str | None]:
    """'41.10 tokens/s' -> (41.1, 'tokens/s'); '34.2%' -> (34.2, '%'); 'True' -> (True, None).

    NaN (vLLM prints it when nothing was drafted) becomes None so JSON stays valid."""
    text = text.strip()
    if text.isdigit():  # fast paths: most values are plain integers or decimals
        return int(text), None
    if text[:1].isdigit() and text.replace(".", "", 1).isdigit():
        return float(text), None
    if text in ("True", "False"):
        return text == "True", None
    m = NUM_RE.match(text)
    if not m:
        return text, None
    num = m.group("num")
    value: Any = float(num)
    if math.isnan(value) or math.isinf(value):
        value = None
    elif re.fullmatch(r"[-+]?\d+", num):
        value = int(num)
    return value, m.group("unit")


def parse_kv_tail(
    tail: str, base: int = 0
) -> tuple[dict[str, Any], dict[str, str], dict[str, tuple[int, int]]]:
    """Split 'k: v, k: v, ...' into (fields, units, value spans).

    A segment without ': ' continues the previous value as a list (vLLM's per-position rates
    '0.700, 0.450, 0.250'). Trailing ', ' (SGLang 0.5.x) and a final '.' (vLLM V0) are ignored."""
    fields: dict[str, Any] = {}
    units: dict[str, str] = {}
    spans: dict[str, tuple[int, int]] = {}
    end = len(tail.rstrip())
    while end and tail[end - 1] in ",.":
        end -= 1
        while end and tail[end - 1] == " ":
            end -= 1
    tail = tail[:end]
    last: str | None = None
    pos = 0
    for seg in tail.split(", "):
        start = pos
        pos += len(seg) + 2
        if not seg.strip():
            continue
        k, sep, v = seg.partition(": ")
        if not sep:
            if last is not None:
                value, _ = parse_value(seg)
                prev = fields[last]
                if isinstance(value, int | float) and not isinstance(value, bool):
                    prev = prev if isinstance(prev, list) else [prev]
                    prev.append(float(value))
                    fields[last] = prev
                    s0 = spans[last][0]
                    spans[last] = (s0, base + start + len(seg))
            continue
        key = norm_key(k)
        if not key:
            continue
        value, unit = parse_value(v)
        fields[key] = value
        if unit:
            units[key] = unit
        spans[key] = (base + start + len(k) + 2, base + start + len(seg))
        last = key
    return fields, units, spans


def parse_nccl_env_line(line: str) -> dict[str, Any] | None:
    """`host:pid:tid [dev] NCCL INFO NAME set by environment to VALUE[.]` -> fields, else None.

    NCCL prints integer params as '%lld.' (trailing dot) and strings as '%s' (no dot)."""
    if "set by environment to" not in line:
        return None
    m = NCCL_ENV_RE.search(ANSI_RE.sub("", line.rstrip("\r\n")))
    if not m:
        return None
    value = m.group("value")
    if re.fullmatch(r"-?\d+\.", value):
        value = value[:-1]
    return {
        "host": m.group("host"),
        "pid": int(m.group("pid")),
        "tid": int(m.group("tid")),
        "rank": int(m.group("rank")),
        "name": m.group("name"),
        "value": value,
    }


@dataclass
class Prefix:
    """What the line prefix told us; `start` is where the message begins in the cleaned line."""

    start: int = 0
    ts: str | None = None
    ranks: str | None = None
    level: str | None = None


def split_prefix(line: str) -> Prefix:
    """Find the message start past wrappers (docker, Ray, vLLM process tags) and the logger prefix."""
    p = Prefix()
    m = WRAPPER_RE.match(line)
    start = m.end() if m else 0
    rest = line[start:]
    for rx in (SGLANG_PREFIX_RE, SGLANG_DICT_PREFIX_RE, VLLM_PREFIX_RE):
        pm = rx.match(rest)
        if pm:
            gd = pm.groupdict()
            p.ts = gd.get("ts")
            ranks = (gd.get("ranks") or "").strip()
            if gd.get("gpu") is not None:
                ranks = f"GPU{gd['gpu']}"
            p.ranks = ranks or None
            p.level = gd.get("level")
            start += pm.end()
            break
    p.start = start
    return p


def _is_num(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _rx(*alternatives: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{a})" for a in alternatives))


@dataclass(frozen=True)
class Pack:
    """One server's log vocabulary. Everything a caller may reuse is data or a pure method."""

    name: str
    heads: tuple[tuple[str, re.Pattern[str]], ...]  # (event, regex whose end is where the k/v tail starts)
    metric_map: dict[str, dict[str, str]]  # event -> {field key: metric name} (first present field wins)
    milestones: tuple[tuple[str, re.Pattern[str]], ...]  # (phase, regex) in startup order
    errors: tuple[tuple[str, re.Pattern[str]], ...]  # (kind, regex), specific before generic
    ready_re: re.Pattern[str]
    warmup_done_re: re.Pattern[str]  # end of warmup (includes the ready line)
    restart_re: re.Pattern[str]  # a new server start in the same file: warmup begins again
    # plain literals (no regex metacharacters) selecting a superset of the lines the pack reports; the
    # on-box agent finds literals with bytes.find, far faster than one big regex alternation
    prefilter: tuple[str, ...]
    percent_fields: frozenset[str] = frozenset()  # fields printed as fractions in old versions -> x100
    error_levels: frozenset[str] = frozenset()  # logger levels that make a line an error
    list_metrics: frozenset[str] = frozenset()  # metrics that are always lists (one value per position)
    # event -> {metric: field keys}: when two or more are present the metric is their max (SGLang's
    # hybrid sliding-window models: token usage = max of the full and the SWA pool)
    max_of: dict[str, dict[str, tuple[str, ...]]] = field(default_factory=dict)

    def message(self, line: str) -> str:
        line = ANSI_RE.sub("", line) if "\x1b" in line else line
        return line[split_prefix(line).start :]

    def phase_of(self, line: str) -> str | None:
        """Startup phase a milestone line enters (e.g. 'load_weights', 'cuda_graph', 'ready'), else None."""
        msg = self.message(line)
        for phase, rx in self.milestones:
            if rx.search(msg):
                return phase
        return None

    def error_kind(self, line: str) -> str | None:
        """Kind of error ('oom', 'nccl', 'watchdog', 'exception', ...) or None for a normal line."""
        clean = ANSI_RE.sub("", line) if "\x1b" in line else line
        prefix = split_prefix(clean)
        return self._error_kind(clean[prefix.start :], prefix.level)

    def _error_kind(self, msg: str, level: str | None) -> str | None:
        if _TRACE_CONT.match(msg):
            return None
        for kind, rx in self.errors:
            if rx.search(msg):
                return kind
        if level in self.error_levels:
            return "error_log"
        return None

    def is_error(self, line: str) -> bool:
        return self.error_kind(line) is not None

    def is_ready(self, line: str) -> bool:
        return bool(self.ready_re.search(line))

    def is_warmup_done(self, line: str) -> bool:
        return bool(self.warmup_done_re.search(line))

    def parse_message(self, msg: str, base: int = 0, level: str | None = None) -> Parsed | None:
        """Parse one message (prefix already removed; `base` = its position in the line)."""
        for event, rx in self.heads:
            m = rx.search(msg)
            if not m:
                continue
            fields, units, spans = parse_kv_tail(msg[m.end() :], base + m.end())
            for k, v in m.groupdict().items():
                if v is not None:
                    fields[k] = int(v) if v.isdigit() else v
                    spans[k] = (base + m.start(k), base + m.end(k))
            metrics: dict[str, float | list[float]] = {}
            out_spans: list[tuple[int, int, str]] = []
            for name, keys in self.max_of.get(event, {}).items():
                present = [k for k in keys if _is_num(fields.get(k))]
                if len(present) > 1:
                    top = max(present, key=lambda k: fields[k])
                    metrics[name] = float(fields[top])
                    out_spans.append((*spans[top], name))
            for key, name in self.metric_map.get(event, {}).items():
                if name in metrics or key not in fields:
                    continue
                value = fields[key]
                if isinstance(value, list) or name in self.list_metrics:
                    values = value if isinstance(value, list) else [value]
                    if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in values):
                        continue
                    metrics[name] = [float(x) for x in values]
                elif isinstance(value, int | float) and not isinstance(value, bool):
                    if key in self.percent_fields and units.get(key) != "%":
                        value = round(value * 100.0, 9)
                    metrics[name] = float(value)
                else:
                    continue
                s, e = spans[key]
                out_spans.append((s, e, name))
            return Parsed(event, fields, metrics, out_spans)
        if self.ready_re.search(msg):
            return Parsed("ready", phase="ready")
        if self.warmup_done_re.search(msg):
            return Parsed("warmup_done", phase=self._phase(msg))
        kind = self._error_kind(msg, level)
        if kind:
            return Parsed("error", {"error_kind": kind})
        phase = self._phase(msg)
        if phase:
            fields = {}
            for mm in _MILESTONE_NUM_RE.finditer(msg):
                key = norm_key(mm.group(1))
                if key and key not in fields:
                    fields[key] = parse_value(mm.group(2))[0]
            fields["phase"] = phase
            return Parsed("startup", fields, phase=phase)
        return None

    def _phase(self, msg: str) -> str | None:
        for phase, rx in self.milestones:
            if rx.search(msg):
                return phase
        return None


_ERR_COMMON = (
    ("oom", r"CUDA out of memory|OutOfMemoryError"),
    ("nccl", r"NCCL error"),
)

SGLANG = Pack(
    name="sglang",
    heads=(
        ("decode_batch", re.compile(r"Decode batch(?: \[(?P<iter>\d+)\])?[.,] ")),
        # 2024 (tp_worker.py/scheduler.py): "Prefill batch(mixed #running-req: N). #new-seq: ..."
        (
            "prefill_batch",
            re.compile(
                r"Prefill batch(?: \[(?P<iter>\d+)\])?(?:\(mixed #running-req: (?P<mixed_running_req>\d+)\))?[.,] "
            ),
        ),
    ),
    metric_map={
        "decode_batch": {
            "accept_len": "accept_len",
            "accept_rate": "accept_rate",
            "gen_throughput": "gen_throughput",
            "running_req": "running_req",
            "queue_req": "queue_req",
            "token_usage": "token_usage",
            "full_token_usage": "token_usage",
        },
        "prefill_batch": {
            "input_throughput": "input_throughput",
            "running_req": "running_req",
            "mixed_running_req": "running_req",
            "queue_req": "queue_req",
            "token_usage": "token_usage",
            "full_token_usage": "token_usage",
        },
    },
    milestones=(
        ("args", re.compile(r"server_args=ServerArgs\(")),
        ("init_distributed", re.compile(r"Init torch distributed begin")),
        ("init_distributed_done", re.compile(r"Init torch distributed ends")),
        ("load_weights", re.compile(r"Load weight begin")),
        ("load_weights_done", re.compile(r"Load weight end")),
        ("kv_cache", re.compile(r"KV Cache is allocated|Using KV cache dtype")),
        ("memory_pool_done", re.compile(r"Memory pool end")),
        (
            "draft_cuda_graph",
            re.compile(r"Capture draft(?: extend)? cuda graph begin|Capture draft \w+ CUDA graph begin"),
        ),
        (
            "draft_cuda_graph_done",
            re.compile(r"Capture draft(?: extend)? cuda graph end|Capture draft \w+ CUDA graph end"),
        ),
        ("cuda_graph", re.compile(r"Capture cuda graph begin|Capture target \w+ CUDA graph begin")),
        ("cuda_graph_done", re.compile(r"Capture cuda graph end|Capture target \w+ CUDA graph end")),
        ("scheduler_ready", re.compile(r"max_total_num_tokens=\d+")),
        ("startup_timings", re.compile(r"Engine startup timings")),
        ("http_server", re.compile(r"Started server process|Waiting for application startup")),
        ("http_ready", re.compile(r"Application startup complete|Uvicorn running on")),
        ("warmup", re.compile(r'"(?:GET /(?:get_)?model_info|POST /generate) HTTP')),
        ("ready", re.compile(r"The server is fired up and ready to roll!")),
    ),
    errors=tuple(
        (k, re.compile(r))
        for k, r in (
            ("scheduler_exception", r"Scheduler hit an exception"),
            ("detokenizer_exception", r"DetokenizerManager hit an exception"),
            ("sigquit", r"Received sigquit from a child proces|SIGQUIT received"),
            ("watchdog", r"watchdog timeout"),
            ("cuda_graph", r"Capture cuda graph failed"),
            *_ERR_COMMON,
            ("rank_load_failed", r"could finish the model loading, but there are other ranks"),
            ("health_check", r"Health check failed"),
            ("warmup", r"Initialization failed\. warmup error"),
            ("not_enough_memory", r"Not enough memory\. Please try to increase --mem-fraction-static"),
            ("exception", _GENERIC_EXC),
        )
    ),
    max_of={
        event: {"token_usage": ("full_token_usage", "swa_token_usage")}
        for event in ("decode_batch", "prefill_batch")
    },
    ready_re=re.compile(r"The server is fired up and ready to roll!"),
    warmup_done_re=re.compile(r"The server is fired up and ready to roll!|Warmup ended"),
    restart_re=re.compile(r"server_args=ServerArgs\("),
    prefilter=(
        "Decode batch",
        "Prefill batch",
        "server_args=",
        "Init torch distributed",
        "Load weight",
        "KV Cache is allocated",
        "Using KV cache dtype",
        "Memory pool end",
        "Capture ",
        "max_total_num_tokens=",
        "Engine startup timings",
        "Started server process",
        "Waiting for application startup",
        "Application startup complete",
        "Uvicorn running on",
        "model_info HTTP",
        "POST /generate HTTP",
        "fired up and ready",
        "Warmup ended",
        "hit an exception",
        "sigquit",
        "SIGQUIT",
        "watchdog timeout",
        "NCCL error",
        "could finish the model loading",
        "Health check failed",
        "Initialization failed",
        "Not enough memory",
        "out of memory",
        "Error",
        "Exception",
        "set by environment to",
    ),
)

VLLM = Pack(
    name="vllm",
    heads=(
        ("engine_stats", re.compile(r"(?:Engine (?P<engine>\d+): )?(?=Avg prompt throughput: )")),
        ("spec_decode", re.compile(r"(?P<spec_format>SpecDecoding|Speculative) metrics: ")),
    ),
    metric_map={
        "engine_stats": {
            "avg_prompt_throughput": "avg_prompt_throughput",
            "avg_generation_throughput": "avg_generation_throughput",
            "gpu_kv_cache_usage": "kv_cache_usage",
            "kv_cache_usage": "kv_cache_usage",
        },
        "spec_decode": {
            "mean_acceptance_length": "mean_acceptance_length",
            "accepted_throughput": "accepted_throughput",
            "drafted_throughput": "drafted_throughput",
            "avg_draft_acceptance_rate": "draft_acceptance_rate",
            "draft_acceptance_rate": "draft_acceptance_rate",
            "per_position_acceptance_rate": "per_position_acceptance",
        },
    },
    milestones=(
        # newest (utils log_version_and_model): "vLLM server version X, serving model M", or the logo
        # whose second line ends "█ ▀▄▀ █  version X"
        (
            "args",
            re.compile(r"vLLM (?:API )?server version|▀▄▀ █\s+version |non-default args: |args: Namespace\("),
        ),
        ("engine_init", re.compile(r"Initializing a V1 LLM engine|Initializing an LLM engine")),
        ("init_distributed", re.compile(r"vLLM is using nccl==")),
        ("load_weights", re.compile(r"Starting to load model")),
        ("load_weights_done", re.compile(r"Loading weights took|Model loading took")),
        ("kv_cache", re.compile(r"Available KV cache memory|GPU KV cache size")),
        ("cuda_graph_done", re.compile(r"Graph capturing finished")),
        ("engine_ready", re.compile(r"init engine \(profile, create kv cache, warmup model\) took")),
        (
            "http_server",
            re.compile(
                r"Starting vLLM (?:API )?server|Started server process|Waiting for application startup"
            ),
        ),
        ("ready", re.compile(r"Application startup complete")),
    ),
    errors=tuple(
        (k, re.compile(r))
        for k, r in (
            ("engine_core_failed", r"EngineCore failed to start|Engine core initialization failed"),
            ("worker_init_failed", r"WorkerProc initialization failed"),
            ("engine_dead", r"EngineDeadError"),
            *_ERR_COMMON,
            ("no_cache_memory", r"No available memory for the cache blocks"),
            ("exception", _GENERIC_EXC),
        )
    ),
    ready_re=re.compile(r"Application startup complete"),
    warmup_done_re=re.compile(r"Application startup complete"),
    restart_re=re.compile(r"vLLM (?:API )?server version|▀▄▀ █\s+version "),
    prefilter=(
        "Avg prompt throughput",
        "SpecDecoding metrics",
        "Speculative metrics",
        "vLLM API server version",
        "vLLM server version",
        "▀▄▀ █",
        "non-default args",
        "args: Namespace",
        "Initializing a V1 LLM engine",
        "Initializing an LLM engine",
        "vLLM is using nccl",
        "Starting to load model",
        "Loading weights took",
        "Model loading took",
        "Available KV cache memory",
        "GPU KV cache size",
        "Graph capturing finished",
        "init engine",
        "Starting vLLM",
        "Started server process",
        "Waiting for application startup",
        "Application startup complete",
        "ERROR ",
        "CRITICAL ",
        "failed to start",
        "initialization failed",
        "EngineDeadError",
        "out of memory",
        "No available memory",
        "NCCL error",
        "Error",
        "Exception",
        "set by environment to",
    ),
    percent_fields=frozenset({"draft_acceptance_rate"}),
    error_levels=frozenset({"ERROR", "CRITICAL"}),
    list_metrics=frozenset({"per_position_acceptance"}),
)

PACKS: dict[str, Pack] = {"sglang": SGLANG, "vllm": VLLM}
PACK_NAMES = ("auto", *PACKS)

# evidence for auto detection: (pack, weight, regex)
_DETECT = (
    (
        "sglang",
        3,
        re.compile(r"(?:Decode|Prefill) batch[ .,\[(]|server_args=ServerArgs\(|fired up and ready to roll"),
    ),
    ("sglang", 2, re.compile(r"sglang::|sglang\.srt|^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?: [A-Z]+\d+)+\] ")),
    ("sglang", 1, re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] |sglang")),
    (
        "vllm",
        3,
        re.compile(
            r"SpecDecoding metrics|Speculative metrics|Avg prompt throughput|vLLM (?:API )?server version"
        ),
    ),
    (
        "vllm",
        2,
        re.compile(r"\((?:APIServer|EngineCore\w*|Worker\w*|VllmWorker\w*) (?:rank=\d+ )?pid=\d+\)|VLLM::"),
    ),
    ("vllm", 1, re.compile(r"^(?:DEBUG|INFO|WARNING|ERROR) \d\d-\d\d \d\d:\d\d:\d\d |vLLM|vllm")),
)
DECIDE_MARGIN = 3


def detect_scores(line: str) -> dict[str, int]:
    """Evidence one line gives for each pack (summed over lines by `PackDetector`)."""
    scores = {"sglang": 0, "vllm": 0}
    wrapper = WRAPPER_RE.match(line) if line[:1] in "(" or "|" in line[:40] else None
    clean = line[wrapper.end() :] if wrapper else line
    for name, weight, rx in _DETECT:
        if rx.search(clean):
            scores[name] += weight
    return scores


class PackDetector:
    """Accumulates evidence line by line; `decided` once one pack leads by DECIDE_MARGIN."""

    def __init__(self) -> None:
        self.scores = {"sglang": 0, "vllm": 0}
        self.decided: str | None = None

    def feed(self, line: str) -> str | None:
        if self.decided:
            return self.decided
        for k, v in detect_scores(line).items():
            self.scores[k] += v
        s, v = self.scores["sglang"], self.scores["vllm"]
        if s - v >= DECIDE_MARGIN:
            self.decided = "sglang"
        elif v - s >= DECIDE_MARGIN:
            self.decided = "vllm"
        return self.decided

    def best(self) -> str | None:
        """The decided pack, else whichever has more evidence, else None."""
        if self.decided:
            return self.decided
        s, v = self.scores["sglang"], self.scores["vllm"]
        return None if s == v else ("sglang" if s > v else "vllm")


def detect_pack(lines: Iterable[str]) -> str | None:
    """'sglang', 'vllm' or None (no evidence) for a sample of lines."""
    det = PackDetector()
    for line in lines:
        if det.feed(line):
            break
    return det.best()


def get_pack(name: str) -> Pack:
    try:
        return PACKS[name]
    except KeyError:
        raise ValueError(f"unknown pattern pack {name!r} (choose from {', '.join(PACK_NAMES)})") from None
