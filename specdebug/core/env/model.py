"""The models of an environment check: query, per-process env, per-variable verdicts, the report.

Their own module so the verb, the pane and the JSON output share one shape without the check logic.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from specdebug.core.model import Model
from specdebug.engines import ENGINES
from specdebug.engines.primitives import parse_nccl_env_line as _parse_nccl_fields

EnvironState = Literal["readable", "clobbered", "denied", "gone"]
VarStatus = Literal["ok", "missing", "different", "unverifiable"]
VarSource = Literal["environ", "nccl_log", "launcher"]

DEFAULT_PREFIXES: tuple[str, ...] = (
    "NCCL_",
    "CUDA_",
    "TORCH_",
    *(prefix for engine in ENGINES.values() for prefix in engine.env_prefixes),
    "PYTORCH_",
)

#: What the server does to its workers' env: per engine, version and flags (the engine's env_rules).
SERVER_OVERWRITES_SOURCE = "specdebug.engines"

CLK_TCK = 100  # USER_HZ: the unit of /proc/PID/stat start times on every mainstream Linux arch
NCCL_ENV_MARKER = "set by environment to"
SPT_ADVICE = "relaunch with SPT_NOENV=1 (specdebug launch sets it by default)"


class NcclEnvLine(Model):
    """One `HOST:PID:TID [RANK] NCCL INFO NAME set by environment to VALUE` line."""

    host: str
    pid: int
    tid: int
    rank: int
    name: str
    value: str
    line: str


def parse_nccl_env_line(line: str) -> NcclEnvLine | None:
    """Parse NCCL's proof line (the logs package owns the format; this adds the line itself)."""
    fields = _parse_nccl_fields(line)
    if fields is None:
        return None
    return NcclEnvLine(**fields, line=line.rstrip("\r\n"))


class VarCheck(Model):
    """One variable on one process: status, the expected and actual values (masked), and the source."""

    status: VarStatus
    expected: str | None = None
    actual: str | None = None
    source: VarSource = "environ"
    overwritten_by_server: bool = False
    note: str | None = None


class ProcEnv(Model):
    """A worker (or the launcher) with its environ state and per-variable checks."""

    pid: int
    ppid: int | None = None
    pgid: int | None = None
    title: str = ""
    user: str | None = None
    uid: int | None = None
    start_time: float | None = None  # epoch seconds
    state: str | None = None
    environ_state: EnvironState
    environ_error: str | None = None
    env_count: int = 0  # NAME=value pairs read
    vars: dict[str, VarCheck] = Field(default_factory=dict)
    extra: dict[str, str] = Field(default_factory=dict)  # prefix-matching vars not expected (masked)


class Evidence(Model):
    """Proof other than the worker's own environ: an NCCL log line, or the launcher's environ."""

    source: Literal["nccl_log", "launcher"]
    pid: int | None = None
    rank: int | None = None
    name: str
    value: str
    line: str | None = None
    is_worker: bool = True


class EnvSummary(Model):
    workers: int
    ok: bool | None  # None: a box-wide look, which gives no verdict (it is not the profile's server)
    exit_code: int
    counts: dict[str, int] = Field(default_factory=dict)  # var status -> number of (worker, var) cells
    environ_states: dict[str, int] = Field(default_factory=dict)
    method: str = ""  # how the answer was obtained (shown in the pane and the verb)
    reasons: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    server_kind: str | None = None

    @property
    def verdict(self) -> str:
        """What the front ends print: OK, FAILED, or no verdict for a box-wide look."""
        return BOX_WIDE_VERDICT if self.ok is None else "OK" if self.ok else "FAILED"


BOX_WIDE_VERDICT = "box-wide look"


class EnvReport(Model):
    selection: str
    box_wide: bool = False  # every matching process on the box, not the profile's server: no verdict
    expected: dict[str, str] = Field(default_factory=dict)  # masked
    expected_source: str = ""
    prefixes: list[str] = Field(default_factory=list)
    log_path: str | None = None
    masked: bool = True
    workers: list[ProcEnv] = Field(default_factory=list)
    launcher: ProcEnv | None = None
    evidence: list[Evidence] = Field(default_factory=list)
    summary: EnvSummary

    def worker(self, pid: int) -> ProcEnv | None:
        return next((w for w in self.workers if w.pid == pid), None)

    def env_of(self, pid: int) -> dict[str, str]:
        """Visible (masked) values of one process: checked vars with an actual value, plus extras."""
        proc = self.launcher if self.launcher and self.launcher.pid == pid else self.worker(pid)
        if proc is None:
            return {}
        out = {k: v.actual for k, v in proc.vars.items() if v.actual is not None and v.source == "environ"}
        out.update(proc.extra)
        return dict(sorted(out.items()))


class EnvQuery(Model):
    """What to check: how to find the workers and what env they should have."""

    pids: list[int] = Field(default_factory=list)
    match: str | None = None
    root_pid: int | None = None
    pgid: int | None = None
    expected: dict[str, str] = Field(default_factory=dict)
    expected_source: str = "--expect"
    expect_from_launcher: bool = False
    prefixes: list[str] = Field(default_factory=lambda: list(DEFAULT_PREFIXES))
    log_path: str | None = None
    server_kind: str | None = None
    server_version: str | None = None  # picks the version's env rules (unknown: rules say "maybe")
    server_argv: list[str] | None = None  # flags such as --enable-symm-mem (default: the launcher's cmdline)
    show_secrets: bool = False
    box_wide: bool = False  # asked for explicitly (--all-matching): a look at the box, never a verdict
