"""One line, one number (issue 38): a user-instrumentation timing line is read by the engine's pack
(engines.pack.TIMINGS_COMMON) and every consumer gets the same figure from it: bench's server
figures, the verify gate, `spec` (live and from a result), `scan`, and the on-box follow that feeds
the Logs pane and `grep`.  Before, core.bench.serverlog had its own regex: bench, the gate and spec
saw 17.2 ms, while scan and the Logs pane (the packs) saw nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from specdebug.core.bench.serverlog import server_metrics
from specdebug.core.bisect.gate import gate_value, parse_gate
from specdebug.core.logs.events import LogEvent
from specdebug.core.logs.matches import follow_matches
from specdebug.core.logs.parser import LogParser
from specdebug.core.logs.scan import scan_file
from specdebug.core.profiles import Profile
from specdebug.core.spec.live import live_entry
from specdebug.core.spec.points import point_of
from tests.unit.test_log_follow_local import LocalRemote

P = "[2026-01-15 12:00:{:02d} TP0] "
DECODE = (
    "Decode batch, #running-req: 1, #token: 900, token usage: 0.01, accept len: 2.50, accept rate: 0.62, "
    "cuda graph: True, gen throughput (token/s): 120.00, #queue-req: 0"
)
# the story's line (a user's own instrumentation: no engine prints it), and the sim's --profile-verify shape
VERIFY = "Target verify: 17.20 ms"
PROFILE_LINE = "[EAGLE3 profile] step=10 draft: 4.00 ms, Target verify: 17.20 ms, accept: 3"
LINES = [P.format(1) + DECODE, P.format(2) + VERIFY, P.format(3) + DECODE, P.format(4) + PROFILE_LINE]
WANT_VERIFY, WANT_DRAFT = 17.2, 4.0


def write_log(tmp_path: Path) -> Path:
    log = tmp_path / "server.log"
    log.write_text("\n".join(LINES) + "\n")
    return log


def profile_for(log: Path, kind: str) -> Profile:
    argv = ["python", "-m", "sglang.launch_server"] if kind == "sglang" else ["vllm", "serve", "m"]
    argv += ["--port", "30000"]
    return Profile.model_validate({"name": "p", "server": {"argv": argv, "kind": kind, "log_file": str(log)}})


@pytest.mark.parametrize("kind", ["sglang", "vllm", "custom"])
async def test_one_timing_line_gives_one_number_to_every_consumer(tmp_path: Path, kind: str) -> None:
    log = write_log(tmp_path)
    data = log.read_bytes()

    bench, _ = server_metrics(data, {}, kind)  # the runner's server figures
    assert bench.verify_ms == pytest.approx(WANT_VERIFY) and bench.extra["draft_ms"] == pytest.approx(
        WANT_DRAFT
    )
    assert gate_value(data, parse_gate("verify_ms<=25"), {}, kind) == pytest.approx(WANT_VERIFY)
    assert gate_value(data, parse_gate("draft_ms<=5"), {}, kind) == pytest.approx(WANT_DRAFT)

    live = await live_entry(LocalRemote(), profile_for(log, kind))  # `spec` with no result: the log now
    assert live is not None and live.result.server is not None
    assert live.result.server.verify_ms == pytest.approx(WANT_VERIFY)
    point = point_of(live)
    assert point.verify_ms == pytest.approx(WANT_VERIFY)

    scan = scan_file(log, pack=kind if kind != "custom" else "auto")  # `specdebug scan`
    assert scan.metrics["verify_ms"]["n"] == 2 and scan.metrics["verify_ms"]["mean"] == pytest.approx(
        WANT_VERIFY
    )
    assert scan.metrics["draft_ms"]["mean"] == pytest.approx(WANT_DRAFT)


async def test_the_box_selects_the_timing_lines_for_the_logs_pane(tmp_path: Path) -> None:
    """The Logs pane follows through the on-box agent, which ships only the lines the pack's
    prefilter selects: the timing lines must pass it, and parse to the same number."""
    log = write_log(tmp_path)
    got: list[float] = []
    async for item in follow_matches(
        LocalRemote(), str(log), LogParser("sglang"), from_start=True, once=True
    ):
        if not isinstance(item, LogEvent) and "verify_ms" in item.metrics:
            got.append(item.metrics["verify_ms"])
    assert got == [WANT_VERIFY, WANT_VERIFY]


def test_a_profile_pattern_of_the_same_name_replaces_the_packs_reading() -> None:
    """A profile's own `verify_ms` pattern is the user's reading of their line: it wins on every
    line (as serverlog's did), not only where both match; the pack's draft time stays."""
    own = {"verify_ms": r"Target verify took (?P<value>[0-9.]+) ?ms"}
    data = ("\n".join([*LINES, P.format(5) + "Target verify took 30.00 ms"]) + "\n").encode()
    bench, _ = server_metrics(data, own, "sglang")
    assert bench.verify_ms == pytest.approx(30.0) and bench.extra["draft_ms"] == pytest.approx(WANT_DRAFT)
    assert LogParser("sglang", patterns=own).parse(P.format(2) + VERIFY) is None


@pytest.mark.parametrize(
    "line",
    [
        "Capture target verify CUDA graph end. elapsed=1.20 s, mem usage=0.20 GB, avail mem=9.00 GB.",
        "Engine startup timings (s): load_weight=3.1, cuda_graph={target_verify=2.5, draft_decode=1.2}",
        "SpecDecoding metrics: Mean acceptance length: 2.50, Accepted throughput: 10.00 tokens/s, "
        "Drafted throughput: 20.00 tokens/s, Accepted: 100 tokens, Drafted: 200 tokens, "
        "Per-position acceptance rate: 0.800, 0.600, Avg Draft acceptance rate: 50.0%",
    ],
)
def test_engine_lines_that_name_verify_or_draft_give_no_timing(line: str) -> None:
    for pack in ("sglang", "vllm"):
        m = LogParser(pack).parse(P.format(1) + line)
        assert m is None or not {"verify_ms", "draft_ms"} & m.metrics.keys()
