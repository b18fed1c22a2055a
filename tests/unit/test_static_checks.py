"""The package type-checks clean (`mypy specdebug` on the settings in pyproject.toml).

CI installs the dev extra, which has mypy; elsewhere the test says why it skips.  mypy's cache
goes to a temporary folder so the check never depends on (or writes) a cache in the checkout.
Marked `static`: `pytest -m static` runs it (.ci/run does, as a step of its own); a plain run leaves it out.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.static  # ~16 s of CPU alone: a step of its own (.ci/run), never inside the parallel run
@pytest.mark.skipif(
    importlib.util.find_spec("mypy") is None, reason="mypy not installed (pip install -e .[dev])"
)
def test_mypy_is_clean(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "mypy", "specdebug", "--cache-dir", str(tmp_path / "mypy-cache")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
