"""Every test that parses Python does it through tests/pyparse.py (the collector paused).

A bare parse in a parallel worker fails now and then on CPython 3.11 with "AST constructor
recursion depth mismatch" when an earlier test's leftover finalizer runs inside it (seen in a full
run: the architecture-map test, which still parsed bare).
"""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
BARE = re.compile(r"\bast\." + r"parse\(")


def bare_parses(root: Path) -> list[str]:
    return [
        f"{path.relative_to(root)}:{n}"
        for path in sorted(root.rglob("*.py"))
        if path.name != "pyparse.py"
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if BARE.search(line) and not line.lstrip().startswith("#")
    ]


def test_no_test_parses_python_bare() -> None:
    assert bare_parses(TESTS) == []


def test_the_check_finds_a_bare_parse(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text("import ast\ntree = ast." + "parse('x = 1')\n")
    assert bare_parses(tmp_path) == ["t.py:2"]
