"""An example's name is accepted wherever a profile is (issue 41: `bench -c baseline` said "no such
file" while `demo -c baseline` found examples/baseline.toml); a file of that name here still wins."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from specdebug.resources import data_dir
from specdebug.verbs.common import VerbExit, load_profile_or_exit


def test_verbs_load_an_example_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    examples = data_dir("examples")
    assert examples is not None
    assert load_profile_or_exit("baseline", "bench").source == examples / "baseline.toml"
    assert load_profile_or_exit("vllm-sim-eagle3.toml", "launch").name == "vllm-sim-eagle3"
    (tmp_path / "baseline").write_text('[server]\nargv = ["mine"]\n')
    assert load_profile_or_exit("baseline", "bench").server.argv == ["mine"]  # a file here wins
    with pytest.raises(VerbExit):
        load_profile_or_exit("no-such-example", "bench")


def test_profile_check_takes_an_example_name(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "specdebug.cli", "profile", "check", "baseline"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stdout + r.stderr
