"""No module outside specdebug/engines and specdebug/sim spells an engine's name: the engines are adapters.

What counts: every string constant in the code (f-string parts included) that contains `sglang` or
`vllm` in any case.  What does not: docstrings (module, class, function, and bare string statements
such as attribute docstrings) and comments, which may name the engines to explain; identifiers (a
module path such as `specdebug.engines.sglang` is an import, not a literal).  A service asks
`specdebug.engines.get_engine(kind)` or iterates `ENGINES` instead.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.pyparse import parse_file

PKG = Path(__file__).resolve().parents[2] / "specdebug"
HOMES = ("engines", "sim")  # where engine names belong
NAME_RE = re.compile(r"sglang|vllm", re.IGNORECASE)


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings or bare string statements."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            out.add(id(node.value))
    return out


def engine_literals(root: Path) -> list[str]:
    """`path:line: 'text'` for every counted literal under root, outside the homes."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if rel.parts[0] in HOMES:
            continue
        tree = parse_file(path)
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docs
                and NAME_RE.search(node.value)
            ):
                found.append(f"{rel.as_posix()}:{node.lineno}: {node.value[:60]!r}")
    return found


def test_no_engine_name_outside_engines_and_sim():
    assert engine_literals(PKG) == []


def test_the_counter_sees_a_literal_and_skips_docstrings(tmp_path):
    (tmp_path / "core").mkdir()
    (tmp_path / "engines").mkdir()
    (tmp_path / "core" / "x.py").write_text(
        '"""Reads SGLang logs."""\n'
        "import specdebug.engines.sglang\n"
        "def f(kind):\n"
        '    """vLLM too."""\n'
        "    # sglang in a comment\n"
        '    return kind == "sglang" or f"{kind} VLLM::"\n'
    )
    (tmp_path / "engines" / "y.py").write_text('NAME = "sglang"\n')
    assert engine_literals(tmp_path) == ["core/x.py:6: 'sglang'", "core/x.py:6: ' VLLM::'"]
