"""What pipx users get: a built wheel, installed into a fresh venv, runs `specdebug demo --check`.

The wheel must carry examples/ and layouts/ (specdebug/_data/) and find them without the checkout.
The venv reuses this interpreter's installed dependencies (--system-site-packages) so the test
needs no download beyond the build backend; `.ci/run` also does it with a venv that installs
everything from the index.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def run(argv: list[str], **kw) -> subprocess.CompletedProcess:
    r = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, **kw)
    assert r.returncode == 0, f"{argv}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


def test_wheel_in_a_fresh_venv_runs_the_demo_check(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(REPO)], timeout=300)
    (wheel,) = dist.glob("specdebug-*.whl")

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", str(wheel)],
        timeout=300,
    )

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPECDEBUG_SESSION")}
    env["XDG_DATA_HOME"] = str(tmp_path / "data")
    where = run(
        [
            str(py),
            "-c",
            "import specdebug, specdebug.resources as r; print(specdebug.__file__); "
            "print(r.data_dir('examples')); print(r.data_dir('layouts'))",
        ],
        cwd=tmp_path,
        env=env,
    ).stdout.splitlines()
    assert where[0].startswith(str(env_dir)), f"specdebug imported from {where[0]}, not the wheel"
    assert where[1] == str(Path(where[0]).parent / "_data" / "examples")
    assert where[2] == str(Path(where[0]).parent / "_data" / "layouts")

    r = run([str(env_dir / "bin" / "specdebug"), "demo", "--check"], cwd=tmp_path, env=env, timeout=240)
    assert "demo check passed" in r.stdout
    assert "_data/examples/eagle3-2step-nccl.toml" in r.stdout  # the wheel's copy, not the checkout's
