"""The README's two set-up commands do their own set-up (issue 26): a venv inside the command, no
`pip install` into an "externally managed" system Python, the Debian packages the tests need, and
`.ci/run` runs exactly the README's test command (read through tests/readme_commands.py)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tests.readme_commands import README, readme_commands

ROOT = Path(__file__).resolve().parents[2]
VENV = ".venv/bin/"


def steps(command: str) -> list[list[str]]:
    """The simple commands of an `a && b && c` line, split as the shell would."""
    assert not re.search(r"[;|`]|\$\(|(?<!&)&(?!&)", command), f"only && chains: {command}"
    return [shlex.split(part) for part in command.split("&&")]


def check_shape(command: str) -> list[list[str]]:
    run = steps(command)
    made = [i for i, s in enumerate(run) if s[:3] == ["python3", "-m", "venv"] and s[3:] == [".venv"]]
    assert made, f"no `python3 -m venv .venv` in: {command}"
    for i, s in enumerate(run):
        pip = s[0].endswith("pip") or s[1:3] == ["-m", "pip"]
        if pip:  # every pip is the venv's, and only after the venv exists
            assert s[0].startswith(VENV), f"pip outside the venv: {shlex.join(s)}"
            assert i > made[0]
        if "specdebug" in s[0] or "pytest" in s:
            assert s[0].startswith(VENV), f"runs outside the venv: {shlex.join(s)}"
    apt = [s for s in run if s[0] == "apt-get" and s[1] == "install"]
    assert all("-y" in s for s in apt), "apt-get install must not wait for a yes"
    if apt:
        assert run[0] == ["apt-get", "update"], "a fresh machine has no package lists: apt-get update first"
    return run


def test_the_readme_has_both_commands_with_their_own_set_up() -> None:
    cmds = readme_commands(README.read_text(encoding="utf-8"))
    demo = check_shape(cmds["demo"])
    assert demo[-1] == [".venv/bin/specdebug", "demo"]  # .ci/run appends --check to it
    tests = check_shape(cmds["tests"])
    assert tests[-1][:3] == [".venv/bin/python", "-m", "pytest"]
    (apt,) = [s for s in tests if s[:2] == ["apt-get", "install"]]
    assert {"openssh-server", "tmux", "python3-venv"} <= set(apt)
    (pip,) = [s for s in tests if s[:2] == [".venv/bin/pip", "install"]]
    assert "-e" in pip and ".[dev]" in pip
    # a path line, not setuptools' import hook that each of the run's ~2,600 Python processes loads
    assert pip[pip.index("--config-settings") + 1] == "editable_mode=compat"


@pytest.mark.parametrize(
    "bad",
    [
        "pip install . && specdebug demo",  # the old README: externally-managed-environment on Debian
        "python3 -m venv .venv && pip install . && .venv/bin/specdebug demo",
        "python3 -m venv .venv && python3 -m pip install . && .venv/bin/specdebug demo",
        "python3 -m venv .venv && .venv/bin/pip install . ; .venv/bin/specdebug demo",
        "apt-get install tmux && python3 -m venv .venv && .venv/bin/python -m pytest -q",
    ],
)
def test_the_shape_check_refuses_a_system_pip_or_a_bare_step(bad: str) -> None:
    with pytest.raises(AssertionError):
        check_shape(bad)


def test_ci_runs_the_readme_commands_as_written() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert 'tests_cmd="$(python3 tests/readme_commands.py tests)"' in ci
    assert 'bash -c "$tests_cmd"' in ci
    assert 'bash -c "$demo_cmd --check"' in ci
    assert "export SPECDEBUG_REQUIRE_SSHD=1" in ci and ci.index("SPECDEBUG_REQUIRE_SSHD") < ci.index(
        'bash -c "$tests_cmd"'
    )
    assert "specdebug-*.whl" in ci and 'bin/specdebug" demo --check' in ci  # the wheel check stays
    # no other set-up: what CI needs beyond the README's commands would make the README untrue
    code = [line for line in ci.splitlines() if not line.lstrip().startswith("#")]
    assert not [line for line in code if "apt-get" in line or "python3 -m pip" in line]
