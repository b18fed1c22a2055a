"""One /metrics page into one value per metric: replicas dropped, DP ranks summed, NaN left out.

Why here and not in a regex: the text is parsed with prometheus_client's maintained parser; this
module only decides how the series of one metric combine, which is where servers differ.

* Replicas: with `--enable-metrics-for-all-schedulers` every TP/EP rank of one model replica exports
  the same figures, told apart only by `tp_rank` / `moe_ep_rank`.  A series is a replica only when
  another series has the same labels apart from those two; of such a group the lowest rank is kept.
* DP ranks: with `--enable-dp-attention` SGLang has one scheduler collector per DP rank, labelled with
  that rank's global `tp_rank`, its `moe_ep_rank` and `dp_rank` (srt/observability/metrics_collector.py,
  labels near 1377-1394 in 0.5.23).  They differ in `dp_rank` too, so they are not replicas: counts and
  rates are summed (16 running requests over 8 ranks, not rank 0's 2), ratios (accept length, usage)
  averaged.  vLLM's DP engines (label `engine`) are summed the same way.
* How many DP ranks: the distinct values of the engine's DP label (`PromNames.dp_label`: vLLM `engine`,
  SGLang `dp_rank`), 1 without one.  Never the number of series of one metric: real vLLM 0.32 exports
  several series per metric and engine (`finished_reason`, waiting `reason`, `sleep_state`, `source`,
  `position`), which read a TP-2 server without DP as 5 ranks.
* NaN / Infinity (a gauge with nothing to report yet): left out of the combination and named in
  `nonfinite`, so JSON shows null and says why, never an invalid `NaN`.
"""

from __future__ import annotations

import math

from pydantic import Field

from specdebug.core.model import Model
from specdebug.engines import ENGINES, EngineName

REPLICA_LABELS = ("tp_rank", "moe_ep_rank")
# ratio-like metrics are averaged over series, everything else is summed
_MEAN = ("accept_length", "accept_rate", "token_usage", "usage_perc", "cache_hit_rate")


class PromSnapshot(Model):
    """One scrape: every sample name -> combined value; vLLM's per-position counter by position."""

    t: float  # seconds on the caller's clock (monotonic)
    engine: EngineName | None = None
    values: dict[str, float] = Field(default_factory=dict)
    per_pos: dict[int, float] = Field(default_factory=dict)
    error: str | None = None  # the page was cut or had a line the parser rejected (values so far kept)
    nonfinite: dict[str, str] = Field(default_factory=dict)  # metric -> "NaN" / "+Inf" series left out
    dp_ranks: int = 1  # distinct values of the engine's DP label: the DP ranks / engines summed


# settings every DP rank reports alike (SGLang 0.5.23): the same number, not a sum
_MEAN_NAMES = frozenset(name for e in ENGINES.values() for name in e.prom.mean_names)
# the labels that name a DP rank, per engine (vLLM `engine`, SGLang `dp_rank`)
_DP_LABELS = {e.name: e.prom.dp_label for e in ENGINES.values() if e.prom.dp_label}
# counters with a `position` label, summed per position (vLLM's accepted tokens per draft position)
_PER_POS = tuple((e.name, e.prom.accepted_per_pos) for e in ENGINES.values() if e.prom.accepted_per_pos)


def is_mean(name: str) -> bool:
    """Ratios and settings are averaged over series; counts, rates and counters summed."""
    return name in _MEAN_NAMES or any(k in name for k in _MEAN)


def combine(name: str, series: list[float]) -> float:
    return sum(series) / len(series) if is_mean(name) else sum(series)


def _rank(labels: dict[str, str]) -> tuple[int, ...]:
    return tuple(int(v) if (v := labels.get(k, "0")).isdigit() else 0 for k in REPLICA_LABELS)


def parse_metrics(text: str, t: float = 0.0) -> PromSnapshot:
    """Parse a /metrics page; a malformed line stops parsing with `error` set (values so far kept)."""
    # here, not at the top: the package's __init__ loads its HTTP exposition too (~30 ms a verb)
    from prometheus_client.parser import text_string_to_metric_families

    snap = PromSnapshot(t=t)
    # (name, labels without the replica labels) -> (rank, value) of the lowest-ranked replica
    groups: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[tuple[int, ...], float]] = {}
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                value = float(s.value)
                if not math.isfinite(value):
                    snap.nonfinite[s.name] = "NaN" if math.isnan(value) else f"{value:+}"
                    continue
                rest = tuple(sorted((k, v) for k, v in s.labels.items() if k not in REPLICA_LABELS))
                key, rank = (s.name, rest), _rank(s.labels)
                if key not in groups or rank < groups[key][0]:
                    groups[key] = (rank, value)
    except (ValueError, TypeError, IndexError, KeyError) as exc:
        snap.error = f"/metrics: parsing stopped at a malformed line ({exc})"
    series: dict[str, list[float]] = {}
    per_pos: dict[int, float] = {}
    dp_values: dict[str, set[str]] = {label: set() for label in _DP_LABELS.values()}
    for (name, rest), (_, value) in groups.items():
        for label, val in rest:
            if label in dp_values:
                dp_values[label].add(val)
        if name.startswith(tuple(prefix for _, prefix in _PER_POS)):
            pos = dict(rest).get("position", "")
            if pos.isdigit() and not name.endswith("_created"):
                per_pos[int(pos)] = per_pos.get(int(pos), 0.0) + value
            continue
        series.setdefault(name, []).append(value)
    snap.values = {name: combine(name, vals) for name, vals in series.items() if vals}
    for name in list(snap.nonfinite):
        if name in snap.values:  # other series of it were finite: combined without the NaN ones
            snap.nonfinite[name] += " (some series, left out)"
    snap.per_pos = dict(sorted(per_pos.items()))
    names = " ".join(snap.values) + " " + " ".join(snap.nonfinite)
    snap.engine = next((e.name for e in ENGINES.values() if e.prom.prefix in names), None)
    if snap.engine is None and per_pos:
        snap.engine = _PER_POS[0][0]
    dp_label = _DP_LABELS.get(snap.engine) if snap.engine is not None else None
    snap.dp_ranks = max(1, len(dp_values[dp_label])) if dp_label else 1
    return snap
