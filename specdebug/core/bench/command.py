"""The profile's own benchmark command ([bench] command), run on the box: its output streamed line
by line, its result block parsed (core.bench.external); `{port}` names the server's port.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from specdebug.core.bench import external
from specdebug.core.bench.models import BenchResult
from specdebug.core.secrets import mask_argv
from specdebug.remote.api import Remote

MAX_OUTPUT_LINES = 5000  # external output kept for parsing (the result block is at the end)
LineFn = Callable[[str], None]


def substitute(argv: list[str], port: int) -> list[str]:
    """``{port}`` in the external command names the server's port on the box (data, no shell)."""
    return [a.replace("{port}", str(port)) for a in argv]


async def run_external(
    remote: Remote,
    argv: list[str],
    *,
    cwd: str | None = None,
    on_line: LineFn | None = None,
) -> BenchResult:
    """Run the profile's benchmark command on the box, stream its output, parse its result block."""
    lines: list[str] = []
    t0 = time.time()
    async with remote.stream(argv, cwd=cwd, stderr=True) as stream:
        async for line in stream:
            text = line if isinstance(line, str) else line.decode("utf-8", "replace")
            text = text.rstrip("\n")
            lines.append(text)
            if len(lines) > MAX_OUTPUT_LINES:
                del lines[: len(lines) - MAX_OUTPUT_LINES]
            if on_line is not None:
                on_line(text)
        status = stream.exit_status
    parsed = external.parse_output("\n".join(lines))
    if parsed is None:
        res = BenchResult(kind="external", source_format="unknown", status="failed")
        tail = [x for x in lines if x.strip()][-5:]
        res.errors = [f"no result block in the output (exit {status})", *tail]
        res.unparsed_lines = lines[-50:]
    else:
        res = parsed
        res.kind = "external"
        if status not in (0, None):
            res.warnings.append(f"benchmark command exited with status {status}")
    res.config.command = mask_argv(list(argv))
    if res.duration_s is None:
        res.duration_s = time.time() - t0
    return res
