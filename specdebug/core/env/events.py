"""The typed events an environment check streams: what it found, what it read, then the report.

A check is three probes (process table, /proc files, the log's NCCL lines); front ends show each
step as it lands (`probe.env_events`) and take the EnvReport from the last event.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from specdebug.core.env.model import EnvReport
from specdebug.core.model import Model


class EnvProcessesFound(Model):
    """The process table was listed and the workers chosen from it."""

    type: Literal["processes"] = "processes"
    processes: int  # processes listed (after the box-side filter)
    workers: int
    launcher_pid: int | None = None
    how: str = ""  # how the workers were chosen
    missing_pids: list[int] = Field(default_factory=list)  # asked for by PID, but gone

    def describe(self) -> str:
        launcher = f", launcher {self.launcher_pid}" if self.launcher_pid is not None else ""
        return f"found {self.workers} worker(s) among {self.processes} processes{launcher}; reading /proc…"


class EnvFilesRead(Model):
    """The workers' /proc files were read (one probe)."""

    type: Literal["files"] = "files"
    files: int
    unreadable: int  # files the probe could not read (gone, denied)


class EnvLogRead(Model):
    """The server log was searched for NCCL's own 'set by environment' lines."""

    type: Literal["log"] = "log"
    path: str
    lines: int
    error: str | None = None


class EnvDone(Model):
    """The check is over: the report (masked unless show_secrets was asked)."""

    type: Literal["done"] = "done"
    report: EnvReport


EnvEvent = EnvProcessesFound | EnvFilesRead | EnvLogRead | EnvDone
"""Everything `env_events` yields; the last one is an EnvDone."""
