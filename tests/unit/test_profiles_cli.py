"""`specdebug profile check|schema|diff` through the CLI entry (exit codes, JSON shapes)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from specdebug.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_check_prints_resolved_toml(capsys) -> None:
    assert main(["profile", "check", str(EXAMPLES / "eagle3-3step-nccl.toml")]) == 0
    out = capsys.readouterr().out
    data = tomllib.loads(out)  # the resolved profile is valid TOML again
    assert data["name"] == "eagle3-3step-nccl"
    assert data["server"]["env"]["NCCL_PROTO"] == "LL"
    assert data["workers"]["match"] == "sglang::scheduler"  # inherited from baseline via eagle3-3step
    assert "extends" in out.splitlines()[1]


def test_check_json_and_error(capsys, tmp_path: Path) -> None:
    assert main(["profile", "check", "--json", str(EXAMPLES / "baseline.toml")]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["server"]["port"] == 31000 and len(data["fingerprint"]) == 12
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "b"\n[server]\nargv = ["x"]\nprot = 1\n')
    assert main(["profile", "check", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:4: server.prot: unknown key 'prot'" in err


def test_schema(capsys) -> None:
    assert main(["profile", "schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert "server" in schema["properties"] and "ServerSpec" in schema["$defs"]


def test_diff_text_and_json(capsys) -> None:
    a, b = str(EXAMPLES / "eagle3-2step-nccl.toml"), str(EXAMPLES / "eagle3-3step.toml")
    assert main(["profile", "diff", a, b]) == 0
    out = capsys.readouterr().out
    assert "--speculative-num-steps" in out and "NCCL_PROTO" in out and "--port" not in out
    assert main(["profile", "diff", "--json", a, b]) == 0
    data = json.loads(capsys.readouterr().out)
    knobs = {k["name"]: k for k in data["knobs"]}
    assert (
        knobs["--speculative-num-steps"]["value_a"] == "2"
        and knobs["--speculative-num-steps"]["value_b"] == "3"
    )
    assert knobs["NCCL_ALGO"]["kind"] == "env" and knobs["NCCL_ALGO"]["value_b"] is None
    assert main(["profile", "diff", "--all", "--json", a, b]) == 0
    assert "--port" in {k["name"] for k in json.loads(capsys.readouterr().out)["knobs"]}
