"""SGLang 0.5.23 shapes (issue 21 section 1): restart marker, init milestones, accept-rate definitions.

Every sample is built from the shapes in shared/formats/current-sources.md 3.1 (the wheel's file and
line are in docs/current-sources-notes.md) through the sim's own Shapes, with invented values, so the
sim and the parser are checked against the same rows; the older shapes are checked alongside.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from specdebug.core.control.actions import _last_run_offset
from specdebug.core.control.events import ServerPhase
from specdebug.core.control.tracker import StartupTracker
from specdebug.core.logs.acceptrate import (
    DEFINITIONS,
    OWN,
    WITH_BONUS,
    WITHOUT_BONUS,
    draft_tokens_in,
    which_definition,
)
from specdebug.core.logs.parser import LogParser
from specdebug.core.logs.scan import scan_file
from specdebug.engines.detect import detect_pack
from specdebug.engines.sglang_pack import SGLANG
from specdebug.sim.server.sglang.shapes import DEFAULT_VERSION, Shapes, version_tuple

OLD, NEW = "0.5.4.post1", "0.5.23"
TS = "[2026-12-01 10:00:0{s}{rank}] "


@dataclass
class ServerArgs:  # a ServerArgs look-alike: the sim prints its repr (old) or its dict (0.5.23)
    model_path: str = "m"
    tp_size: int = 2
    speculative_num_steps: int = 2
    speculative_num_draft_tokens: int = 3


def decode(shapes: Shapes, accept_len: float, rate: float, s: int = 5) -> str:
    line = shapes.decode(
        running=1, used=100, usage=0.01, spec=(accept_len, rate), graph=True, tput=94.0, queued=0
    )
    return TS.format(s=s, rank=" TP0") + line


def two_runs(version: str) -> str:
    """Run 1: 4 decode lines at accept len 1.90; run 2 (appended): 4 at 1.50. Rates as `version` prints them."""
    sh = Shapes(version)
    rate = lambda length: round(sh.accept_rate(round(length * 100), 100, 3), 2)  # noqa: E731
    lines = []
    for length in (1.90, 1.50):
        lines.append(TS.format(s=0, rank="") + sh.args_line(ServerArgs()))
        lines.append(TS.format(s=1, rank=" TP0") + sh.init_begin())
        lines.append(TS.format(s=2, rank="") + "The server is fired up and ready to roll!")
        lines += [decode(sh, length, rate(length)) for _ in range(4)]
    return "\n".join(lines) + "\n"


def test_the_default_version_is_the_newest_read():
    assert DEFAULT_VERSION == NEW and version_tuple(NEW) == (0, 5, 23)


@pytest.mark.parametrize("version", [OLD, NEW])
def test_two_run_log_gives_the_last_run_only(version: str, tmp_path: Path):
    """current-sources.md 3.1 #1: 0.5.23 logs `server_args={...}` (a dict); scan --last-run and attach's
    replay start at the last marker in both shapes."""
    text = two_runs(version)
    assert ("server_args={'model_path': 'm'" in text) == (version == NEW)
    log = tmp_path / "two.log"
    log.write_text(text)
    res = scan_file(log, pack="auto", last_run=True)
    assert res.pack == "sglang"
    assert res.metrics["accept_len"]["n"] == 4 and res.metrics["accept_len"]["mean"] == pytest.approx(1.50)
    whole = scan_file(log, pack="sglang")
    assert whole.metrics["accept_len"]["n"] == 8
    data = text.encode()
    second = data.index(b"server_args=", data.index(b"server_args=") + 1)
    assert _last_run_offset(data, "sglang") == data.rindex(b"\n", 0, second) + 1
    assert detect_pack(text.splitlines()[:1] * 2) == "sglang"  # the args line alone is strong evidence


@pytest.mark.parametrize("version", [OLD, NEW])
def test_init_lines_give_the_init_phase(version: str):
    """current-sources.md 3.1 #2: `Init parallel begin.` / `Init parallel ends. elapsed=...` (bootstrap.py)."""
    sh = Shapes(version)
    begin = TS.format(s=1, rank=" TP0") + sh.init_begin()
    end = TS.format(s=1, rank=" TP0") + sh.init_end(1.5, 0.3)
    assert SGLANG.phase_of(begin) == "init_distributed" and SGLANG.phase_of(end) == "init_distributed_done"
    assert ("Init parallel" in begin) == (version == NEW)
    t = StartupTracker(kind="sglang", started_at=1000.0, timeout_s=60.0, profile="p", pid=7, pgid=7)
    events = t.feed_line(TS.format(s=0, rank="") + sh.args_line(ServerArgs()), 1001.0)
    events += t.feed_line(begin, 1002.0)
    assert [e.name for e in events if isinstance(e, ServerPhase)] == ["args", "init_distributed"]


def test_newest_load_weight_and_kv_lines():
    """3.1 #6/#7: no `dtype=` in Load weight end, no `Using KV cache dtype` line (the milestones hold)."""
    new, old = Shapes(NEW), Shapes(OLD)
    assert "dtype=" not in new.load_weight_end(1.0, "X", 10.0, 60.0)
    assert "dtype=torch.bfloat16" in old.load_weight_end(1.0, "X", 10.0, 60.0)
    assert new.kv_dtype_line is None and old.kv_dtype_line
    assert (
        SGLANG.phase_of("[2026-12-01 10:00:00 TP0] " + new.load_weight_end(1.0, "X", 1.0, 6.0))
        == "load_weights_done"
    )
    assert new.phase_lines()["init"] == "Init parallel begin." and old.phase_lines()["kv_cache"].startswith(
        "Using"
    )


def test_accept_rate_definition_by_version():
    """3.1 #3 (metrics_reporter.py:968-985): 2 steps / 3 draft tokens at accept length 1.88 prints 0.44 on
    0.5.23 and 0.63 before; specdebug names the definition and shows its own rate (0.44) for both."""
    assert Shapes(NEW).accept_rate(188, 100, 3) == pytest.approx(0.44)
    assert Shapes(OLD).accept_rate(188, 100, 3) == pytest.approx(0.6267, abs=1e-4)
    assert which_definition(1.88, 0.44, 3) == WITHOUT_BONUS
    assert which_definition(1.88, 0.63, 3) == WITH_BONUS
    assert which_definition(3.0, 1.0, 3) is None  # every draft accepted: both definitions agree
    assert which_definition(1.88, 0.63, None) is None
    for version, want in ((OLD, WITH_BONUS), (NEW, WITHOUT_BONUS)):
        parser, lines = LogParser("sglang"), two_runs(version).splitlines()
        from specdebug.core.logs.scan import Analyzer

        an = Analyzer(parser, last_run=True)
        for line in lines:
            an.feed(line)
        res = an.result()
        assert res.rate_definitions["accept_rate"] == DEFINITIONS[want]
        assert res.metrics[OWN]["mean"] == pytest.approx(0.25)  # (1.50 - 1) / (3 - 1), either version
        assert OWN in res.rate_definitions


def test_draft_tokens_from_both_args_shapes():
    assert draft_tokens_in(Shapes(NEW).args_line(ServerArgs())) == 3
    assert draft_tokens_in(Shapes(OLD).args_line(ServerArgs(speculative_num_draft_tokens=6))) == 6
    assert draft_tokens_in("server_args={'model_path': 'm'}") is None


def test_dspark_decode_parts_parse():
    """3.1 #4 (metrics_reporter.py:1001-1004): `cap len:` and `block accept len:` after accept rate."""
    line = (
        "[2026-12-01 10:00:05 TP0] Decode batch, #running-req: 1, #token: 300, token usage: 0.01, "
        "accept len: 2.41, accept rate: 0.47, cap len: 4.00, block accept len: 2.10, cuda graph: True, "
        "gen throughput (token/s): 95.12, #queue-req: 0"
    )
    m = LogParser("sglang").parse(line)
    assert m is not None and m.event == "decode_batch"
    assert m.metrics["accept_len"] == pytest.approx(2.41) and m.metrics["gen_throughput"] == pytest.approx(
        95.12
    )
    assert m.fields["cap_len"] == pytest.approx(4.0) and m.fields["block_accept_len"] == pytest.approx(2.1)


def test_scan_takes_the_draft_tokens_from_the_profile_without_an_args_line(tmp_path: Path, capsys):
    """A log excerpt without its server_args line: -c PROFILE's --speculative-num-draft-tokens decides."""
    import json

    from specdebug.cli import main

    log = tmp_path / "excerpt.log"
    log.write_text("\n".join(decode(Shapes(NEW), 1.88, 0.44) for _ in range(3)) + "\n")
    prof = tmp_path / "p.toml"
    prof.write_text(
        'name = "p"\n[server]\nargv = ["python3", "-m", "sglang.launch_server", "--speculative-num-steps", "2", '
        '"--speculative-num-draft-tokens", "3"]\nkind = "sglang"\n'
    )
    assert main(["scan", str(log), "--json"]) == 0
    assert OWN not in json.loads(capsys.readouterr().out)["metrics"]  # cannot tell without the draft tokens
    assert main(["scan", str(log), "-c", str(prof), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["metrics"][OWN]["mean"] == pytest.approx(0.44)
    assert res["rate_definitions"]["accept_rate"] == DEFINITIONS[WITHOUT_BONUS]
