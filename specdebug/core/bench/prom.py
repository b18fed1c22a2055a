"""The benchmark's second server-side source: /metrics over the run's window (see core.metrics).

Kept apart from the runner so the runner needs two calls: `start` before the run, `attach` after.
When the log gave no accept length (quiet log, long --decode-log-interval, --disable-log-stats), the
one from /metrics fills `result.server.accept_len`, with its source recorded, so `history` and
`report` show it.  The server's generation tok/s is taken from a /metrics counter over the bench's own
window whenever there is one, in place of the log's: a stats line covers the engine's log interval
(vLLM: 10 s), which may only partly overlap the run.
"""

from __future__ import annotations

from specdebug.core.bench.models import BenchResult, ServerMetrics
from specdebug.core.metrics import MetricsWindow
from specdebug.engines import engine_of


def start(base_url: str, kind: str | None) -> MetricsWindow:
    """Begin scraping /metrics through the runner's forward (about once a second)."""
    return MetricsWindow(base_url, engine.name if (engine := engine_of(kind)) is not None else None).start()


async def attach(result: BenchResult, window: MetricsWindow) -> None:
    """Stop scraping (one last scrape) and store the window's /metrics figures in the result."""
    result.server_prom = await window.finish()


def cancel(window: MetricsWindow | None) -> None:
    """The run failed or was cancelled: stop scraping, record nothing."""
    if window is not None:
        window.cancel()


def fill_server(result: BenchResult) -> None:
    """Where the log gave no accept length / throughput, take /metrics' (source recorded); the
    generation tok/s from a /metrics counter over the bench window wins over the log's interval mean."""
    prom = result.server_prom
    rates = prom.rates if prom is not None else None
    if prom is None or rates is None:
        return
    server = result.server or ServerMetrics()
    window = (
        f"over the bench's /metrics window ({rates.window_s:.1f} s, {prom.scrapes} scrapes, first to last)"
        if rates.window_s
        else "since the server started"
    )
    gen_src = rates.sources.get("gen_throughput", "")
    counted = rates.gen_throughput is not None and "_total" in gen_src and bool(rates.window_s)
    for field, value, key in (
        ("accept_len", rates.accept_length, "accept_length"),
        ("gen_throughput", rates.gen_throughput, "gen_throughput"),
    ):
        if value is None or (
            getattr(server, field) is not None and not (field == "gen_throughput" and counted)
        ):
            continue
        setattr(server, field, value)
        server.sources[field] = "/metrics"
        src = rates.sources.get(key, "?")
        if field == "gen_throughput":
            whose = (
                "the whole server's generated tokens/s (all streams together, not one stream's decode rate)"
            )
            span = window if counted else "the server's gauge (its last log interval)"
            server.what[field] = f"{whose}: {src.split(' (')[0]} {span}"
        else:
            server.what[field] = f"the server's mean acceptance length (all its requests): {src}, {window}"
    if server.sources or result.server is not None:
        result.server = server
