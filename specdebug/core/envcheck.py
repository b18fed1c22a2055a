"""Did the environment reach the workers?  Per worker PID, per variable, with proof.

Why this is not just `cat /proc/PID/environ`: SGLang and vLLM workers call setproctitle, which
overwrites the memory /proc/PID/environ shows (it reads as NULs) unless SPT_NOENV was set at
launch.  So each worker gets an `environ_state`, and when its environ cannot be read the answer
comes from other evidence: NCCL's own `NAME set by environment to VALUE` lines in the server log
(NCCL_DEBUG=INFO; each names the PID that read the variable) and the launcher's environ (which the
workers inherit, except for what the server overwrites on purpose).

Exit-code semantics (documented for the headless verb):
  * `ok` only from direct proof for that PID: its own environ, or an NCCL log line from that PID.
  * a value seen only in the launcher's environ is inference, not proof: `unverifiable`.
  * exit 0 when every expected variable is `ok` on every worker (and there is at least one worker);
    exit 1 otherwise, with one reason per problem (clobbered/denied/gone environ, missing, different).
Secrets: values whose names look secret are masked in every model this module returns (unless the
caller asks for `show_secrets`); comparisons are done before masking, so `different` still shows.

The code lives in the `specdebug.core.env` package (model, proc, report, probe); this module keeps
the old import path: it re-exports the public names.
"""

from __future__ import annotations

from specdebug.core.env.events import EnvDone, EnvEvent, EnvFilesRead, EnvLogRead, EnvProcessesFound
from specdebug.core.env.model import (
    CLK_TCK,
    DEFAULT_PREFIXES,
    NCCL_ENV_MARKER,
    SERVER_OVERWRITES_SOURCE,
    SPT_ADVICE,
    EnvironState,
    EnvQuery,
    EnvReport,
    EnvSummary,
    Evidence,
    NcclEnvLine,
    ProcEnv,
    VarCheck,
    VarSource,
    VarStatus,
    parse_nccl_env_line,
)
from specdebug.core.env.probe import check_env, env_events, proc_paths, query_for_profile, read_nccl_lines
from specdebug.core.env.proc import classify_environ, parse_btime, parse_environ, parse_passwd, parse_status
from specdebug.core.env.report import build_report

__all__ = [
    "CLK_TCK",
    "DEFAULT_PREFIXES",
    "NCCL_ENV_MARKER",
    "SERVER_OVERWRITES_SOURCE",
    "SPT_ADVICE",
    "EnvDone",
    "EnvEvent",
    "EnvFilesRead",
    "EnvLogRead",
    "EnvProcessesFound",
    "EnvQuery",
    "EnvReport",
    "EnvSummary",
    "EnvironState",
    "Evidence",
    "NcclEnvLine",
    "ProcEnv",
    "VarCheck",
    "VarSource",
    "VarStatus",
    "build_report",
    "check_env",
    "env_events",
    "classify_environ",
    "parse_btime",
    "parse_environ",
    "parse_nccl_env_line",
    "parse_passwd",
    "parse_status",
    "proc_paths",
    "query_for_profile",
    "read_nccl_lines",
]
