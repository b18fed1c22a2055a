"""Server-side figures during a benchmark, from the log bytes the server appended while it ran.

The runner records the log size before and after and hands the slice here. What the server
says about itself (accept length, verify time, generation throughput) is the cross-check of the
client's tok/s: a tok/s drop with an unchanged accept length points at the step time, not at
acceptance. Lines go through the logs service's `LogParser` and nothing else (the same pattern packs
the Logs pane and `specdebug scan` use, the user-instrumentation timings `verify_ms`/`draft_ms`
included: engines.pack.TIMINGS_COMMON), so one line gives one number everywhere.

Each figure says what it is (`ServerMetrics.what`): a stats line covers the whole server over the
engine's log interval (vLLM: 10 s by default), which may start before the run and end after it, so
its generation tok/s is every stream together, diluted by idle time: not the client's per-stream rate.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from specdebug.core.bench.models import ServerMetrics
from specdebug.core.logs.parser import LogParser, PatternError
from specdebug.engines import ENGINES, engine_of

# pack metric names -> our three headline names (SGLang decode line / vLLM stats and spec lines)
ALIASES = {
    "accept_len": "accept_len",
    "mean_acceptance_length": "accept_len",
    "gen_throughput": "gen_throughput",
    "avg_generation_throughput": "gen_throughput",
    "verify_ms": "verify_ms",
}
KNOWN = ("accept_len", "verify_ms", "gen_throughput")
MAX_ERRORS = 5


def _parse(text: str, kind: str, patterns: Mapping[str, str]) -> tuple[dict[str, list[float]], list[str]]:
    """Metric name -> values in log order, and the error lines."""
    pack = kind if kind in ENGINES else "auto"
    try:
        parser = LogParser(pack, patterns=patterns, from_start=False)
    except PatternError:
        parser = LogParser(pack, from_start=False)
    series: dict[str, list[float]] = {}
    errors: list[str] = []
    for line in text.splitlines():
        m = parser.parse(line)
        if m is None:
            continue
        if m.event == "error" or "error" in m.also:
            if len(errors) < MAX_ERRORS:
                errors.append(m.line.strip()[:200])
        for name, value in m.metrics.items():
            if isinstance(value, int | float):
                series.setdefault(ALIASES.get(name, name), []).append(float(value))
    return series, errors


MIN_SE_LINES = 3  # log lines of a figure before its within-run standard error is given


def busy_lines(values: list[float]) -> list[float]:
    """The lines of a run that cover generation, not an idle gap: with MIN_SE_LINES or more, lines under
    half the median are left out (SGLang divides the tokens since its last line by the time since, so the
    line after a pause between two requests reads 7.5 beside 59-74 tok/s, by how long the client paused:
    it made the sim's figure move 1-2 % between identical runs)."""
    if len(values) < MIN_SE_LINES:
        return list(values)
    med = sorted(values)[len(values) // 2]
    return [x for x in values if x >= med / 2]


def mean_se(values: list[float]) -> float | None:
    """The standard error of the mean of these lines (None under MIN_SE_LINES lines)."""
    if len(values) < MIN_SE_LINES:
        return None
    mean = sum(values) / len(values)
    var = sum((x - mean) ** 2 for x in values) / (len(values) - 1)
    return float((var / len(values)) ** 0.5)


def _mean(values: Iterable[float]) -> float | None:
    xs = list(values)
    return sum(xs) / len(xs) if xs else None


def server_metrics(
    log_slice: bytes, patterns: Mapping[str, str] | None = None, kind: str = "auto"
) -> tuple[ServerMetrics, list[str]]:
    """Means of the server's own figures over the slice, and the error lines seen in it.

    The first gen-throughput sample of a slice covers the idle time before the run (SGLang divides
    tokens since the last log line by elapsed time), so it is dropped when later samples exist; so is a
    line over a pause between requests (busy_lines).  `se`: the standard error of that mean over the
    lines, the noise of the server's per-step figure within this run.
    """
    text = log_slice.decode("utf-8", "replace")
    series, errors = _parse(text, kind, patterns or {})
    gen = series.get("gen_throughput", [])
    if len(gen) > 1:
        gen = gen[1:]
    gen = busy_lines(gen)
    res = ServerMetrics(
        accept_len=_mean(series.get("accept_len", [])),
        verify_ms=_mean(series.get("verify_ms", [])),
        gen_throughput=_mean(gen),
        samples=max((len(v) for k, v in series.items() if k in KNOWN), default=0),
        log_bytes=len(log_slice),
    )
    res.extra = {k: m for k, v in series.items() if k not in KNOWN and (m := _mean(v)) is not None}
    if (se := mean_se(gen)) is not None:
        res.se["gen_throughput"] = se
    used = {**series, "gen_throughput": gen}  # the figures as averaged (idle lines dropped)
    res.what = describe_log_figures(kind, {name: used.get(name, []) for name in KNOWN})
    return res, errors


def describe_log_figures(kind: str, series: Mapping[str, list[float]]) -> dict[str, str]:
    """What each log-derived figure is and over which window (one entry per figure present)."""
    engine = engine_of(kind)
    interval = (engine.bench.log_interval if engine is not None else "") or "the server's log interval"
    lines = {name: f"{len(v)} log line{'s' if len(v) != 1 else ''}" for name, v in series.items() if v}
    what: dict[str, str] = {}
    if "gen_throughput" in lines:
        what["gen_throughput"] = (
            f"the whole server's generated tokens/s (all streams together, not one stream's decode rate): "
            f"mean of {lines['gen_throughput']}, each over {interval}, which may only partly overlap the run"
        )
    if "accept_len" in lines:
        what["accept_len"] = (
            f"the server's mean acceptance length (all its requests): mean of {lines['accept_len']}, "
            f"each over {interval}, which may only partly overlap the run"
        )
    if "verify_ms" in lines:
        what["verify_ms"] = f"the server's verify time: mean of {lines['verify_ms']} written during the run"
    return what
