"""The real-engine tier: a real vLLM (the CPU build) on the loopback box, driven by every verb.

It runs when `SPECDEBUG_REAL_ENGINE=1` (set by `tests/real/run.sh`, which installs the pinned vLLM into a
cached venv first; `.ci/run` runs it every time and sets SPECDEBUG_REQUIRE_REAL_ENGINE, so it never skips
there).  The README's test command leaves it out: a real vLLM takes both cores of the machine for a minute
at every start, and the parallel suite beside it would judge neither.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.real.engine import VllmVenv, find_venv

HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("SPECDEBUG_REAL_ENGINE") or os.environ.get("SPECDEBUG_REQUIRE_REAL_ENGINE"):
        return
    skip = pytest.mark.skip(
        reason="the real-engine tier runs with `bash tests/real/run.sh` (installs vLLM CPU)"
    )
    for item in items:
        if Path(str(item.fspath)).is_relative_to(HERE):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def vllm_venv() -> VllmVenv:
    venv = find_venv()
    if venv is None:
        if os.environ.get("SPECDEBUG_REQUIRE_REAL_ENGINE"):
            pytest.fail("SPECDEBUG_REQUIRE_REAL_ENGINE is set but no vLLM venv: run tests/real/install.sh")
        pytest.skip("no vLLM CPU venv (tests/real/install.sh makes one)")
    return venv


@pytest.fixture(scope="session")
def tiny_model(vllm_venv: VllmVenv, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Llama of tests/real/tinymodel.py, made in this run's folder (a second; no download)."""
    folder = tmp_path_factory.mktemp("tiny-llama")
    subprocess.run([str(vllm_venv.python), str(HERE / "tinymodel.py"), str(folder)], check=True, timeout=120)
    return folder
