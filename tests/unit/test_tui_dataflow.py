"""The TUI's data flow as Textual means it, checked from the source of specdebug/tui.

Messages go up, attributes come down (specdebug/tui/store.py): no pane module imports another
pane module, nothing in tui/ overrides or calls Textual's private `_dispatch_action`, and no timer
polls state (`set_interval`: redraws follow changes, see Pane._dirty).
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.pyparse import parse_file, parse_source

TUI = Path(__file__).resolve().parents[2] / "specdebug" / "tui"
PANES = TUI / "panes"


def tui_files() -> list[Path]:
    return sorted(TUI.rglob("*.py"))


def imported(tree: ast.Module) -> set[str]:
    """Every module a file imports (function-level imports included), as dotted names."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def test_no_private_dispatch_action():
    bad = [str(p.relative_to(TUI)) for p in tui_files() if "_dispatch_action" in p.read_text()]
    assert not bad, f"Textual's private _dispatch_action used in {bad}"


def test_no_polling_timers():
    bad = []
    for path in tui_files():
        for node in ast.walk(parse_file(path)):
            if isinstance(node, ast.Attribute) and node.attr == "set_interval":
                bad.append(f"{path.relative_to(TUI)}:{node.lineno}")
    assert not bad, f"set_interval (a timer polling state) in {bad}: set `_dirty = True` on change instead"


def test_no_pane_module_imports_another_pane_module():
    """A pane's own modules (`bench_view` for `bench`) are part of it; any other pane is not."""
    bad = []
    for path in sorted(PANES.glob("*.py")):
        own = path.stem.split("_")[0]
        for name in imported(parse_file(path)):
            if not name.startswith("specdebug.tui.panes."):
                continue
            other = name.split(".")[3]
            if other.split("_")[0] != own:
                bad.append(f"{path.name} imports {name}")
    for path in tui_files():  # widgets and screens are below the panes: they import none
        if path.parent.name in ("widgets", "screens") or path.name in ("pane.py", "store.py", "context.py"):
            bad += [f"{path.name} imports {n}" for n in imported(parse_file(path)) if ".tui.panes." in n]
    assert not bad, bad


def test_the_checks_see_what_they_look_for(tmp_path):
    """The walkers above find a set_interval call and a pane import when there is one."""
    tree = parse_source("from specdebug.tui.panes.bisect import pick_end\nself.set_interval(0.1, f)\n")
    assert "specdebug.tui.panes.bisect" in imported(tree)
    assert any(isinstance(n, ast.Attribute) and n.attr == "set_interval" for n in ast.walk(tree))
