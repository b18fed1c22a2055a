"""The shape the house keeps (issue 12): short modules that say why, strict types where everything
builds on them, no reaching into another class's private parts.

These read the tree only (no imports of the package, no network), so they are cheap and exact.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.pyparse import parse_file

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "specdebug"
# Size follows seams (issue 38): one idea a module, however long it needs; this bound only catches a module
# that has grown a second idea.  It was 450, and classes were split across files to fit it.
MAX_LINES = 700
MODULES = sorted(PACKAGE.rglob("*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def test_no_module_has_grown_past_one_idea():
    long = {_rel(p): n for p in MODULES if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}, f"split these along their seams: {long}"


def test_every_module_has_a_docstring_saying_why():
    bare = [_rel(p) for p in MODULES if not ast.get_docstring(parse_file(p))]
    assert bare == []


def test_core_and_remote_are_type_checked_strictly():
    """No mypy override may relax the strict block for core, remote, transport or the box code."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    relaxing = []
    for override in config["tool"]["mypy"].get("overrides", []):
        modules = override["module"] if isinstance(override["module"], list) else [override["module"]]
        relaxed = [k for k, v in override.items() if k.startswith("disallow_") and v is False]
        relaxed += [k for k in ("check_untyped_defs", "warn_return_any") if override.get(k) is False]
        if relaxed:
            relaxing += [
                m
                for m in modules
                if m.startswith(
                    ("specdebug.core", "specdebug.remote", "specdebug.transport", "specdebug.box")
                )
            ]
    assert relaxing == []


def _ruff() -> list[str] | None:
    if shutil.which("ruff"):
        return ["ruff"]
    probe = subprocess.run([sys.executable, "-m", "ruff", "--version"], capture_output=True)
    return [sys.executable, "-m", "ruff"] if probe.returncode == 0 else None


@pytest.mark.static  # ruff over the whole tree: `pytest -m static` (.ci/run's own step)
@pytest.mark.skipif(_ruff() is None, reason="ruff not installed (pip install -e .[dev])")
def test_no_private_attribute_of_another_class_is_reached():
    """ruff SLF001: `other._private` is a seam that was never declared."""
    ruff = _ruff()
    assert ruff is not None
    r = subprocess.run(
        [*ruff, "check", "--no-cache", "--select", "SLF001", "--output-format", "concise", "specdebug"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-1000:]
