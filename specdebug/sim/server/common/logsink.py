"""Where sim log lines go: stderr/stdout and the --log-file, one whole line per write.

Every process of the sim (launcher, schedulers) opens the log file itself with O_APPEND and writes
each line (or multi-line message, e.g. a traceback) with a single write, so lines never interleave
and `tail -F` sees them the moment they are written.  Formats follow SGLang's `configure_logger`
(`[%Y-%m-%d %H:%M:%S TP0] msg`, no level name) and uvicorn's configs as SGLang sets them.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

DATEFMT = "%Y-%m-%d %H:%M:%S"
LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}


def stamp(prefix: str = "", when: float | None = None) -> str:
    """SGLang's line prefix: `[2026-01-15 12:00:01 TP0]` (prefix is e.g. " TP0" or "")."""
    return f"[{time.strftime(DATEFMT, time.localtime(when))}{prefix}]"


def rank_prefix(tp_rank: int, tp_size: int) -> str:
    """The scheduler's prefix as run_scheduler_process builds it: " TP{rank}" only when tp > 1."""
    return f" TP{tp_rank}" if tp_size > 1 else ""


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except InterruptedError:
            continue
        except OSError:
            return  # a closed terminal or pipe must not take the server down
        view = view[n:]


class LogSink:
    """Writes lines to a std stream and the log file; thread-safe; returns the wall time of the write."""

    def __init__(self, log_file: str | None, *, level: str = "info", prefix: str = ""):
        self.prefix = prefix
        self.level = LEVELS.get(level.lower(), 20)
        self._fd = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) if log_file else None
        self._lock = threading.RLock()  # re-entrant: signal handlers log from the main thread
        self.on_line: Callable[[str, float], None] | None = None

    def raw(self, text: str, *, stream: int = 2) -> float:
        """Write `text` (without trailing newline) as one line to fd `stream` and the log file."""
        data = (text + "\n").encode("utf-8", "replace")
        with self._lock:
            _write_all(stream, data)
            if self._fd is not None:
                _write_all(self._fd, data)
            when = time.time()
        if self.on_line is not None:
            self.on_line(text, when)
        return when

    def log(self, msg: str, *, level: str = "info", prefix: str | None = None) -> float | None:
        """One SGLang-format line (`[ts TP0] msg`); None when below --log-level."""
        if LEVELS.get(level, 20) < self.level:
            return None
        return self.raw(f"{stamp(self.prefix if prefix is None else prefix)} {msg}")

    def info(self, msg: str) -> float | None:
        return self.log(msg, level="info")

    def warning(self, msg: str) -> float | None:
        return self.log(msg, level="warning")

    def error(self, msg: str) -> float | None:
        return self.log(msg, level="error")

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


# The launcher's sink, used by SinkHandler (uvicorn's loggers are configured by dotted class path).
_LAUNCHER_SINK: LogSink | None = None


def set_launcher_sink(sink: LogSink | None) -> None:
    global _LAUNCHER_SINK
    _LAUNCHER_SINK = sink


def launcher_sink() -> LogSink | None:
    return _LAUNCHER_SINK


class SinkHandler(logging.Handler):
    """logging handler that writes formatted records through the launcher's LogSink."""

    def __init__(self, stream: str = "stderr"):
        super().__init__()
        self._stream = 1 if stream == "stdout" else 2

    def emit(self, record: logging.LogRecord) -> None:
        sink = _LAUNCHER_SINK
        if sink is None:
            return
        try:
            sink.raw(self.format(record), stream=self._stream)
        except Exception:  # noqa: BLE001 - logging must never raise into the server
            self.handleError(record)


def uvicorn_log_config(level: str = "info") -> dict[str, Any]:
    """uvicorn's LOGGING_CONFIG with the formats SGLang's set_uvicorn_logging_configs() installs."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {
            "default": {
                "()": "uvicorn.logging.DefaultFormatter",
                "fmt": "[%(asctime)s] %(levelprefix)s %(message)s",
                "datefmt": DATEFMT,
                "use_colors": False,
            },
            "access": {
                "()": "uvicorn.logging.AccessFormatter",
                "fmt": '[%(asctime)s] %(levelprefix)s %(client_addr)s - "%(request_line)s" %(status_code)s',
                "datefmt": DATEFMT,
                "use_colors": False,
            },
        },
        "handlers": {
            "default": {"formatter": "default", "()": SinkHandler, "stream": "stderr"},
            "access": {"formatter": "access", "()": SinkHandler, "stream": "stdout"},
        },
        "loggers": {
            "uvicorn": {"handlers": ["default"], "level": level.upper(), "propagate": False},
            "uvicorn.error": {"level": level.upper()},
            "uvicorn.access": {"handlers": ["access"], "level": level.upper(), "propagate": False},
        },
    }


class Sidecar:
    """`<log-file>.sim.json`: the sim's own record of its phases, rewritten atomically on each change."""

    def __init__(self, path: str | None, base: dict[str, Any]):
        self.path = path
        self.data: dict[str, Any] = {"phases": {}, "ready_at": None, "state": "starting", **base}
        self._lock = threading.RLock()  # re-entrant: signal handlers log from the main thread
        self._flush()

    def phase(self, name: str, when: float) -> None:
        """Record the first time a phase started (ranks race; the earliest wins)."""
        with self._lock:
            phases = self.data["phases"]
            if name not in phases or when < phases[name]:
                phases[name] = when
            self._flush()

    def update(self, **fields: Any) -> None:
        with self._lock:
            self.data.update(fields)
            self._flush()

    def _flush(self) -> None:
        if not self.path:
            return
        tmp = f"{self.path}.tmp{os.getpid()}"
        try:
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(self.data, fh, indent=1, sort_keys=True)
            os.replace(tmp, self.path)
        except OSError:
            pass
