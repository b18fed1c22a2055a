"""The benchmark's second server-side source: /metrics over the run's window (see core.metrics).

Kept apart from the runner so the runner needs two calls: `start` before the run, `attach` after.
When the log gave no accept length (quiet log, long --decode-log-interval, --disable-log-stats), the
one from /metrics fills `result.server.accept_len`, with its source recorded, so `history` and
`report` show it.
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
    """Where the log gave no accept length / throughput, take /metrics' (source recorded)."""
    rates = result.server_prom.rates if result.server_prom is not None else None
    if rates is None:
        return
    server = result.server or ServerMetrics()
    for field, value in (("accept_len", rates.accept_length), ("gen_throughput", rates.gen_throughput)):
        if getattr(server, field) is None and value is not None:
            setattr(server, field, value)
            server.sources[field] = "/metrics"
    if server.sources or result.server is not None:
        result.server = server
