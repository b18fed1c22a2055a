"""`profile check A B ...` reports every problem of every file; `scan` of a missing file is a usage error."""

from __future__ import annotations

import json
from pathlib import Path

from specdebug.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

BAD = """\
name = "bad"
colour = "blue"

[server]
argv = "python3 -m sglang.launch_server"
port = "x"
kind = "tgi"

[bench]
requests = "many"
"""


def test_check_many_files_reports_every_problem(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(BAD)
    good = EXAMPLES / "baseline.toml"
    assert main(["profile", "check", str(good), str(bad), str(tmp_path / "missing.toml")]) == 2
    out = capsys.readouterr().out
    assert f"{good}: ok" in out
    assert f"{bad}: 5 problem(s)" in out
    for where in (
        ":2: colour: unknown key",
        ":5: server.argv",
        ":6: server.port",
        ":7: server.kind",
        ":10: bench.requests",
    ):
        assert f"{bad}{where}" in out, where
    assert "missing.toml: file not found" in out
    assert "1 of 3 profiles ok" in out


def test_check_many_json_lines(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(BAD)
    assert main(["profile", "check", "--json", str(EXAMPLES / "baseline.toml"), str(bad)]) == 2
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines[0]["ok"] is True and lines[0]["name"] == "baseline"
    assert lines[1]["ok"] is False
    assert [p["field"] for p in lines[1]["problems"]] == [
        "colour",
        "server.argv",
        "server.port",
        "server.kind",
        "bench.requests",
    ]


def test_check_one_file_prints_every_problem_to_stderr(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(BAD)
    assert main(["profile", "check", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("error: ") == 5
    assert main(["profile", "check", str(EXAMPLES / "eagle3-2step-nccl.toml")]) == 0


def test_check_every_example(capsys) -> None:
    files = sorted(str(p) for p in EXAMPLES.glob("*.toml"))
    assert main(["profile", "check", *files]) == 0
    assert f"{len(files)} of {len(files)} profiles ok" in capsys.readouterr().out


def test_scan_of_a_missing_file_exits_2(tmp_path: Path, capsys) -> None:
    assert main(["scan", str(tmp_path / "nope.log")]) == 2
    assert "nope.log" in capsys.readouterr().err
