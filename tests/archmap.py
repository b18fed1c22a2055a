"""docs/architecture.md, made from the module docstrings so the map cannot drift from the code.

`python -m tests.archmap` rewrites the file; tests/unit/test_architecture_doc.py fails when it is stale.
The first sentence of each module's docstring is its line; a package's `__init__` line heads its group.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from tests.pyparse import parse_file

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "specdebug"
DOC = ROOT / "docs" / "architecture.md"

HEAD = """# specdebug: the map of the code

Generated from the module docstrings by `python -m tests.archmap` (tests/unit/test_architecture_doc.py
fails when it is out of date). One line per module: the first sentence of its docstring. The design it
follows is described in the project's DESIGN notes; the layering is enforced by tests/unit/test_layering.py
(core, engines, remote and transport never import Textual, the TUI never imports verbs, core never
imports the sim, remote never imports core, transport never imports remote or core, core reaches
transport only through remote, engines import nothing above them and never meet remote or transport,
box/ is stdlib-only for the box's python3 >= 3.7); engine names are spelled only in engines/ and sim/
(test_engine_names.py).
"""


def first_sentence(doc: str) -> str:
    """The docstring's first sentence, on one line."""
    para = " ".join(doc.strip().split("\n\n")[0].split())
    for end in (". ", ": "):
        cut = para.find(end)
        if 0 < cut < 140 and end == ". ":
            return para[: cut + 1]
    return para if len(para) <= 160 else para[:157] + "..."


def _doc(path: Path) -> str:
    tree = parse_file(path)
    return ast.get_docstring(tree) or "(no docstring)"


def render() -> str:
    """The whole document, grouped by package."""
    groups: dict[str, list[tuple[str, str]]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        group = rel.parent.as_posix() if rel.parent.as_posix() != "." else "specdebug"
        groups.setdefault(group, []).append((rel.as_posix(), first_sentence(_doc(path))))
    shells = sorted(p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.sh"))
    out = [HEAD]
    for group in sorted(groups):
        out.append(f"\n## `{group}/`\n" if group != "specdebug" else "\n## `specdebug/` (top level)\n")
        width = max(len(name) for name, _ in groups[group]) + 2
        out.extend(f"    {name.ljust(width)} {line}" for name, line in groups[group])
        out.extend(f"    {s.ljust(width)} shell run on the box" for s in shells if s.startswith(group + "/"))
    out.append("")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    DOC.parent.mkdir(exist_ok=True)
    DOC.write_text(render(), encoding="utf-8")
    sys.stdout.write(f"wrote {DOC.relative_to(ROOT)}\n")
