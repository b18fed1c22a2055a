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
    text = format_report(rep, "gpubox", long=True)
    assert TOKEN not in text
    assert "worker   pid 201" in text and "clobbered" in text
    assert "ok          Simple  [nccl_log]" in text
    assert "different   LL (expected Simple)" in text
    assert "missing     (expected Ring)" in text
    assert "unverifiable (launcher has Ring)  [launcher]" in text
    assert "nccl_log pid 201 [0]" in text
    assert text.rstrip().endswith(")") and "verdict: FAILED" in text


def _mixed_report():
    from specdebug.core.env.report import build_report

    lines = ["box:201:9 [0] NCCL INFO NCCL_PROTO set by environment to Simple"]
    return build_report(
        q(expected={**NCCL, "HF_TOKEN": TOKEN}, log_path="/l"),
        PROCS,
        reads({200: environ(**NCCL, HF_TOKEN=TOKEN), 201: CLOBBERED, 202: environ(NCCL_PROTO="LL")}),
        lines,
    )


def test_matrix_output_marks_every_cell_and_each_different_value_once():
    """The default text is the matrix (issue 41): a row per variable, a column per process, the
    same facts as the long form; a secret stays masked."""
    text = format_report(_mixed_report(), "gpubox")
    assert TOKEN not in text
    rows = {line.split()[0]: line.split()[1:] for line in text.splitlines() if line[:1].isalpha()}
    assert rows["variable"] == ["expected", "launcher", "TP0", "TP1"]
    assert rows["environ"] == ["read", "clob", "read"]
    assert rows["NCCL_PROTO"] == ["Simple", "ok", "ok*", "DIFF"]  # TP0 proven by its NCCL line
    assert rows["NCCL_ALGO"] == ["Ring", "ok", "?~", "MISS"]  # TP0: only the launcher's value
    assert rows["HF_TOKEN"][-3:] == ["ok", "?~", "MISS"]
    assert "  NCCL_PROTO (expected Simple): has LL on TP1(202)" in text.splitlines()
    assert "legend:" in text and text.rstrip().endswith(")") and "verdict: FAILED" in text


def test_matrix_by_node_groups_each_nodes_workers_and_names_the_odd_ones():
    """A deployment: a column per node (its workers grouped), and the workers a mark does not
    name listed below it."""
    from specdebug.core.env.matrix import env_matrix
    from specdebug.verbs.env import format_matrix

    rep = _mixed_report()
    good = rep.model_copy(deep=True)
    for w in good.workers:
        w.vars = {k: v.model_copy(update={"status": "ok"}) for k, v in w.vars.items()}
    text = "\n".join(format_matrix(env_matrix([("node0", good), ("node1", rep)], by_node=True)))
    rows = {line.split()[0]: line.split()[1:] for line in text.splitlines() if line[:1].isalpha()}
    assert rows["variable"] == ["expected", "node0", "node1"]
    assert rows["NCCL_PROTO"] == ["Simple", "ok", "DIFF1/2"]
    assert rows["NCCL_ALGO"] == ["Ring", "ok", "MISS1/2"]
    assert "NCCL_ALGO (expected Ring): missing on node1:TP1(202)" in text
    assert "NCCL_PROTO (expected Simple): has LL on node1:TP1(202)" in text
    assert max(map(len, text.splitlines())) <= 100


def test_deployment_text_is_a_line_per_node_then_one_matrix():
    from specdebug.core.deployment.node_env import NodeEnv
    from specdebug.core.deployment.place import Node
    from specdebug.verbs.env import format_nodes

    rep = _mixed_report()
    envs = [
        NodeEnv(node=Node(host="node0", rank=0, nnodes=3, profile=None), report=rep, nccl=[]),  # type: ignore[arg-type]
        NodeEnv(node=Node(host="node1", rank=1, nnodes=3, profile=None), report=rep, nccl=[]),  # type: ignore[arg-type]
        NodeEnv(
            node=Node(host="node2", rank=2, nnodes=3, profile=None),  # type: ignore[arg-type]
            report=None,
            nccl=[],
            problem="not running there",
            running=False,
        ),
    ]
    text = format_nodes(envs, None, 1)
    lines = text.splitlines()
    assert lines[0].startswith("node 0 node0: FAILED, 2 workers")
    assert "node 2 node2: not running there" in lines
    assert next(line for line in lines if line.startswith("variable")).split() == [
        "variable",
        "expected",
        "node0",
        "node1",
    ]
    assert "NCCL_PROTO (expected Simple): has LL on node0:TP1(202) node1:TP1(202)" in text
    assert lines[-1] == "verdict: FAILED"
