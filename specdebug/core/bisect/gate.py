"""The verify gate: judge a candidate from its own log during warmup, before spending a benchmark.

In the story the regression showed first as the server's verify time (19 ms -> 30 ms); a gate such
as `verify_ms<=25` reads that figure from the log lines the server printed since its launch and
judges the candidate bad without a benchmark.  When warmup printed no such line yet (SGLang's own
warmup is 8 tokens), one short request makes the server print some; that is not a benchmark.
"""

from __future__ import annotations

import contextlib
import logging
import operator
import re
from dataclasses import dataclass

from specdebug.core.bench.builtin import BuiltinParams, run_builtin
from specdebug.core.bench.runner import read_slice
from specdebug.core.bench.serverlog import KNOWN, server_metrics
from specdebug.core.bisect.models import GateCheck
from specdebug.core.control.records import ServerRecord, file_size
from specdebug.core.fingerprint import url_host
from specdebug.core.profiles import Profile
from specdebug.errors import SpecdebugError
from specdebug.remote.api import Remote, RemoteError

logger = logging.getLogger(__name__)

_OPS = {"<=": operator.le, ">=": operator.ge, "<": operator.lt, ">": operator.gt}
_EXPR = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.]*)\s*(<=|>=|<|>)\s*(-?[0-9]+(?:\.[0-9]+)?)\s*$")
PROBE_TOKENS = 64  # the probe request: enough decode steps for a per-10-steps profile line


class GateError(ValueError, SpecdebugError):
    """A gate expression that cannot be used (usage error, exit 2)."""

    exit_code = 2


@dataclass(frozen=True)
class Gate:
    """`NAME OP VALUE`: the candidate passes when its mean NAME over the log lines satisfies it."""

    expr: str
    name: str
    op: str
    limit: float

    def passes(self, value: float) -> bool:
        return bool(_OPS[self.op](value, self.limit))


def parse_gate(expr: str) -> Gate:
    m = _EXPR.match(expr)
    if not m:
        raise GateError(f"--gate {expr!r}: expected NAME<=VALUE (or >=, <, >), e.g. verify_ms<=25")
    return Gate(expr=expr.strip(), name=m.group(1), op=m.group(2), limit=float(m.group(3)))


def gate_value(log: bytes, gate: Gate, patterns: dict[str, str], kind: str) -> float | None:
    """The gate metric's mean over a log slice (profile patterns, then the built-in packs), as the
    benchmark's server figures are computed."""
    metrics, _ = server_metrics(log, patterns, kind)
    if gate.name in KNOWN:
        known: float | None = getattr(metrics, gate.name)
        return known
    return metrics.extra.get(gate.name)


async def check_gate(remote: Remote, profile: Profile, record: ServerRecord, gate: Gate) -> GateCheck:
    """Read the gate metric from the log since the launch; probe with one short request if needed."""
    check = GateCheck(expr=gate.expr, name=gate.name)
    srv = profile.server
    patterns = profile.patterns

    async def value() -> float | None:
        end = await file_size(remote, record.log_file)
        data = await read_slice(remote, record.log_file, record.log_offset, end)
        return gate_value(data, gate, patterns, srv.kind)

    found = await value()
    if found is None:
        check.probed = True
        with contextlib.suppress(RemoteError, OSError):
            fwd = await remote.forward_local_port(srv.port, srv.listen_host)
            try:
                params = BuiltinParams.from_spec(
                    profile.bench, requests=1, output_len=PROBE_TOKENS, input_len=32, concurrency=1
                )
                params.warmup_requests = 0
                await run_builtin(f"http://{url_host(fwd.local_host)}:{fwd.local_port}", params)
            finally:
                try:
                    await fwd.close()
                except Exception:  # the connection may be gone already
                    logger.debug("closing the gate's forward failed", exc_info=True)
        found = await value()
    if found is not None:
        check.value = found
        check.passed = gate.passes(found)
    return check
