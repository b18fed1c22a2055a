"""The `env` verb's argument handling (usage errors exit 2 before connecting) and text output."""

import pytest

from specdebug.cli import main
from specdebug.verbs.env import format_report
from tests.unit.test_env_check import CLOBBERED, NCCL, PROCS, TOKEN, environ, q, reads


@pytest.mark.parametrize(
    "argv",
    [
        ["env", "gpubox", "--match", "sglang", "--expect", "NOEQUALS"],
        ["env", "gpubox", "--match", "sglang", "--expect", "1BAD=x"],
        ["env", "gpubox", "--match", "("],
        ["env", "gpubox", "-c", "/nonexistent/profile.toml"],
    ],
)
def test_usage_errors_exit_2(argv, capsys):
    assert main(argv) == 2
    assert "specdebug: env:" in capsys.readouterr().err


def test_selector_required(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["env", "gpubox"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit):
        main(["env", "gpubox", "--match", "a", "--pid", "3"])


def test_text_output_masks_and_explains():
    from specdebug.core.env.report import build_report

    lines = ["box:201:9 [0] NCCL INFO NCCL_PROTO set by environment to Simple"]
    rep = build_report(
        q(expected={**NCCL, "HF_TOKEN": TOKEN}, log_path="/l"),
        PROCS,
        reads({200: environ(**NCCL, HF_TOKEN=TOKEN), 201: CLOBBERED, 202: environ(NCCL_PROTO="LL")}),
        lines,
    )
    text = format_report(rep, "gpubox")
    assert TOKEN not in text
    assert "worker   pid 201" in text and "clobbered" in text
    assert "ok          Simple  [nccl_log]" in text
    assert "different   LL (expected Simple)" in text
    assert "missing     (expected Ring)" in text
    assert "unverifiable (launcher has Ring)  [launcher]" in text
    assert "nccl_log pid 201 [0]" in text
    assert text.rstrip().endswith(")") and "verdict: FAILED" in text
