"""Numbers from logs are sane or absent in `spec` (issue 40): a server log with a 26-digit verify time
and a 400-digit accept length made `spec --live` print "cycle 55210519235942694516686848.00 ms",
"predicts inf tok/s", and a `--json` with a bare `Infinity` that strict parsers refuse.

(Four logs: each of those figures alone, and both inf at once, which made a NaN.)  Now each figure outside its sane range (core.spec.bounds) is left out with a note naming it and its
source, and the JSON is strict.  The log is read over the real loopback sshd, as `spec --live` does.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from tests.security.boxkit import run, unique, write_profile

DECODE = (
    "[2026-01-15 12:00:0{i} TP0] Decode batch, #running-req: 1, #token: 300, token usage: 0.01, "
    "accept len: {accept}, accept rate: 0.50, cuda graph: True, gen throughput (token/s): 90.00, "
    "#queue-req: 0"
)
VERIFY = "[2026-01-15 12:00:0{i} TP0] [EAGLE3 profile] step={i}0 draft: 4.00 ms, Target verify: {verify} ms, accept: 3"
CASES = {  # what was seen: verify (ms), accept len, the figure left out and how its note shows it
    "a 26-digit verify": ("55210519235942694516686848", "2.50", "verify_ms 5.52105e+25"),
    "an accept length that predicts inf": ("16.00", "1" + "0" * 307, "accept_len 1e+307"),
    "a verify that parses as inf": ("9" * 400, "2.50", "verify_ms +inf"),
    # inf / inf: the old arithmetic made a NaN of it, and `--json` printed a bare NaN
    "an accept length and a verify both inf": ("9" * 400, "1" + "0" * 400, "verify_ms +inf"),
}
ARGV = [
    "python3", "-m", "sglang.launch_server", "--model-path", "m", "--speculative-algorithm", "EAGLE3",
    "--speculative-num-steps", "2", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "3",
]  # fmt: skip


def strict(text: str) -> Any:
    """json.loads that refuses NaN / Infinity, as jq and JavaScript do."""

    def refuse(name: str) -> None:
        raise ValueError(f"not JSON: bare {name}")

    return json.loads(text, parse_constant=refuse)


def numbers(obj: Any) -> list[float]:
    if isinstance(obj, bool):
        return []
    if isinstance(obj, int | float):
        return [float(obj)]
    if isinstance(obj, dict):
        return [x for v in obj.values() for x in numbers(v)]
    if isinstance(obj, list):
        return [x for v in obj for x in numbers(v)]
    return []


@pytest.mark.parametrize("case", list(CASES))
def test_spec_leaves_out_absurd_log_figures_and_prints_strict_json(sshd, tmp_path: Path, case: str) -> None:
    verify, accept, note = CASES[case]
    log = tmp_path / "server.log"
    lines = [DECODE.format(i=i, accept=accept) for i in range(1, 4)]
    lines += [VERIFY.format(i=i, verify=verify) for i in range(1, 4)]
    log.write_text("\n".join(lines) + "\n")
    profile = write_profile(
        tmp_path / "hostile.toml",
        unique("hostile-log"),
        {"argv": ARGV, "port": 1, "log_file": str(log), "kind": "sglang"},
    )
    session = tmp_path / "session"
    session.mkdir()

    got = run(sshd, "spec", "gpubox", "-c", str(profile), "--session", str(session), "--live", "--json")
    assert got.returncode == 0, got.stderr
    data = strict(got.stdout.decode())
    cfg = data["config"]
    assert all(math.isfinite(x) and abs(x) < 1e9 for x in numbers(data)), cfg
    assert cfg["predicted_tok_s"] is None and cfg["draft_ms"] == 4.0, cfg
    assert any(n.startswith(f"{note} from the server log now") and "left out" in n for n in cfg["notes"]), (
        cfg["notes"]
    )

    human = run(sshd, "spec", "gpubox", "-c", str(profile), "--session", str(session), "--live")
    text = human.stdout.decode()
    assert human.returncode == 0, human.stderr
    assert not re.search(r"\binf\b|Infinity|NaN|\d{15,}", text.replace(f"note: {note}", "")), text
    assert "predicts   ? tok/s" in text and f"note: {note}" in text, text


def test_every_verbs_json_is_strict_whatever_figure_reaches_it(capsys) -> None:
    """The last guard behind the bounds: print_json, which every verb's --json goes through, turns a
    NaN or an infinity that slipped past them into null (the old one printed bare NaN / Infinity)."""
    from specdebug.verbs.common import print_json

    print_json({"cycle_ms": math.nan, "tok_s": [math.inf, -math.inf], "nested": {"x": math.nan}, "ok": 1.5})
    out = capsys.readouterr().out
    print(f"print_json of NaN/inf: {out.strip()}")
    assert strict(out) == {"cycle_ms": None, "tok_s": [None, None], "nested": {"x": None}, "ok": 1.5}
