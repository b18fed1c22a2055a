"""What pipx users get: a built wheel, installed into a fresh venv, runs `specdebug demo --check`.

The wheel must carry examples/ and layouts/ (specdebug/_data/) and find them without the checkout.
The venv reuses this interpreter's installed dependencies so the test needs no download beyond
the build backend: its site-packages folders are listed in a .pth file of the fresh venv (after
the venv's own, so the wheel's specdebug wins; their .pth files, an editable checkout's finder
among them, are not run).  `--system-site-packages` would not do: run inside a venv (the README's
flow) it exposes the base interpreter's folders, not the venv's.  `.ci/run` also does it with a
venv that installs everything from the index.
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


def outer_site_dirs() -> list[str]:
    """Where this interpreter's dependencies are installed (a venv's or the system's folders)."""
    dirs = [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages") and Path(p).is_dir()]
    assert dirs, sys.path
    return dirs


def test_wheel_in_a_fresh_venv_runs_the_demo_check(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(REPO)], timeout=300)
    (wheel,) = dist.glob("specdebug-*.whl")

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=False, with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    purelib = run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout
    (Path(purelib.strip()) / "outer_deps.pth").write_text("".join(f"{p}\n" for p in outer_site_dirs()))
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
    # the dependencies are this interpreter's, not its base's (a base Python has none on Debian)
    import asyncssh

    dep = run([str(py), "-c", "import asyncssh; print(asyncssh.__file__)"], cwd=tmp_path, env=env)
    assert dep.stdout.strip() == asyncssh.__file__
    assert where[1] == str(Path(where[0]).parent / "_data" / "examples")
    assert where[2] == str(Path(where[0]).parent / "_data" / "layouts")

    r = run([str(env_dir / "bin" / "specdebug"), "demo", "--check"], cwd=tmp_path, env=env, timeout=240)
    assert "demo check passed" in r.stdout
    assert "_data/examples/eagle3-2step-nccl.toml" in r.stdout  # the wheel's copy, not the checkout's
