"""The layering, checked: core and remote stay headless, and the import contracts hold."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.pyparse import parse_file

pytestmark = pytest.mark.static  # whole-tree: `pytest -m static` (.ci/run's own step), not the parallel run


def test_core_engines_and_remote_do_not_import_textual():
    code = (
        "import importlib, pkgutil, sys\n"
        "import specdebug.core, specdebug.engines, specdebug.remote, specdebug.transport\n"
        "for pkg in (specdebug.core, specdebug.engines, specdebug.remote, specdebug.transport):\n"
        "    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
        "        importlib.import_module(m.name)\n"
        "bad = sorted(n for n in sys.modules if n == 'textual' or n.startswith('textual.'))\n"
        "assert not bad, bad[:5]\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


# --- import contracts, read from the source (every import, function-level ones included) ---

PKG = Path(__file__).resolve().parents[2] / "specdebug"

# layer -> what it must never import.  The layering, one way:
#   specdebug.capability (a leaf every layer may use: the write check) and specdebug.errors (the one
#   error root, SpecdebugError: a leaf below it, which capability's ReadOnlyError derives from)
#   engines (what SGLang/vLLM do) and transport (the pipe to one machine)  <-  remote (the box
#   client)  <-  core (services)  <-  tui / verbs (front ends);  sim is the simulated box.
# tui never reaches the verbs (the verbs are the headless twins, not a library for panes), core never
# needs the simulator, remote never needs core, transport never needs the box client above it, core
# reaches a transport only through the box client (specdebug.remote), engines need nothing above them
# (pure data and pure functions over it) and never meet remote or transport, and none of core,
# engines, remote or transport knows textual.
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "tui": ("specdebug.verbs", "specdebug.cli"),
    # the command line sits above the verbs: they (and the agent) read the verb table in verbs/table.py
    "verbs": ("specdebug.cli",),
    "agent": ("specdebug.cli",),
    "core": (
        "specdebug.sim",
        "specdebug.tui",
        "specdebug.verbs",
        "specdebug.demo",
        "specdebug.transport",
        "textual",
    ),
    "transport": (
        "specdebug.remote",
        "specdebug.core",
        "specdebug.sim",
        "specdebug.tui",
        "specdebug.verbs",
        "specdebug.demo",
        "specdebug.agent",
        "specdebug.engines",
        "textual",
    ),
    "engines": (
        "specdebug.core",
        "specdebug.remote",
        "specdebug.transport",
        "specdebug.sim",
        "specdebug.tui",
        "specdebug.verbs",
        "specdebug.demo",
        "specdebug.box",
        "specdebug.cli",
        "textual",
    ),
    "remote": (
        "specdebug.core",
        "specdebug.engines",
        "specdebug.sim",
        "specdebug.tui",
        "specdebug.verbs",
        "specdebug.demo",
        "textual",
    ),
    "capability.py": (
        "specdebug.core",
        "specdebug.engines",
        "specdebug.remote",
        "specdebug.transport",
        "specdebug.sim",
        "specdebug.tui",
        "specdebug.verbs",
        "specdebug.demo",
        "specdebug.box",
        "textual",
    ),
    "errors.py": ("specdebug.", "textual"),
    # the simulated box stands in for a real one: it shares none of the tool's code it is there to check
    "sim": (
        "specdebug.core",
        "specdebug.engines",
        "specdebug.remote",
        "specdebug.transport",
        "specdebug.tui",
        "specdebug.verbs",
        "specdebug.agent",
        "specdebug.demo",
        "specdebug.cli",
        "textual",
    ),
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Every module a file imports, relative imports resolved against its package."""
    tree = parse_file(path)
    here = _module_name(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            found.add(mod)
            found.update(f"{mod}.{alias.name}" for alias in node.names)
    return found


def _violations(layer: str) -> list[str]:
    target = PKG / layer
    files = [target] if target.is_file() else sorted(target.rglob("*.py"))
    assert files, f"no source under {target}"
    bad = []
    for path in files:
        for mod in sorted(_imports(path)):
            for banned in FORBIDDEN[layer]:
                if mod == banned.rstrip(".") or mod.startswith(
                    banned if banned.endswith(".") else banned + "."
                ):
                    bad.append(f"{_module_name(path)} imports {mod}")
    return bad


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_import_contract(layer):
    assert _violations(layer) == []


def test_the_contract_checker_sees_a_violation(tmp_path):
    """The checker itself can fail: a planted import is reported."""
    fake = tmp_path / "specdebug" / "remote"
    fake.mkdir(parents=True)
    (fake / "x.py").write_text("def f():\n    from ..core import control\n")
    global PKG
    saved, PKG = PKG, tmp_path / "specdebug"
    try:
        assert _violations("remote") == [
            "specdebug.remote.x imports specdebug.core",
            "specdebug.remote.x imports specdebug.core.control",
        ]
    finally:
        PKG = saved


def test_engines_and_remote_never_import_each_other(tmp_path):
    """The two bottom layers are apart: a planted import either way is reported."""
    for layer, other in (("engines", "remote"), ("remote", "engines")):
        fake = tmp_path / "specdebug" / layer
        fake.mkdir(parents=True)
        (fake / "x.py").write_text(f"from specdebug.{other} import api\n")
    global PKG
    saved, PKG = PKG, tmp_path / "specdebug"
    try:
        assert _violations("engines") == [
            "specdebug.engines.x imports specdebug.remote",
            "specdebug.engines.x imports specdebug.remote.api",
        ]
        assert _violations("remote") == [
            "specdebug.remote.x imports specdebug.engines",
            "specdebug.remote.x imports specdebug.engines.api",
        ]
    finally:
        PKG = saved


# --- specdebug/box: code that runs under the box's own python3, shipped as source ---


def _box_violations(box: Path) -> list[str]:
    bad = []
    for path in sorted(box.rglob("*.py")):
        for mod in sorted(_imports(path)):
            top = mod.split(".")[0]  # a relative import resolves to specdebug.box...: refused too
            if top != "__future__" and (top == "specdebug" or top not in sys.stdlib_module_names):
                bad.append(f"{_module_name(path)} imports {mod}")
    return bad


def test_box_code_imports_only_the_stdlib():
    """Nothing of specdebug and nothing third-party: the box has neither."""
    assert _box_violations(PKG / "box") == []


def test_the_box_contract_checker_sees_a_violation(tmp_path):
    fake = tmp_path / "specdebug" / "box"
    fake.mkdir(parents=True)
    (fake / "x.py").write_text(
        "import os\nimport pydantic\nfrom specdebug.remote import api\nfrom . import y\n"
    )
    global PKG
    saved, PKG = PKG, tmp_path / "specdebug"
    try:
        assert _box_violations(fake) == [
            "specdebug.box.x imports pydantic",
            "specdebug.box.x imports specdebug.box",
            "specdebug.box.x imports specdebug.box.y",
            "specdebug.box.x imports specdebug.remote",
            "specdebug.box.x imports specdebug.remote.api",
        ]
    finally:
        PKG = saved


def test_box_code_compiles_for_an_old_python(tmp_path):
    """py_compile clean, and no syntax newer than Python 3.7 (the box floor); annotations are never
    evaluated there (`from __future__ import annotations` in every module with annotations)."""
    import py_compile

    for path in sorted((PKG / "box").rglob("*.py")):
        py_compile.compile(str(path), cfile=str(tmp_path / (path.stem + ".pyc")), doraise=True)
        tree = parse_file(path, feature_version=(3, 7))
        annotated = any(
            isinstance(n, ast.AnnAssign) or (isinstance(n, ast.FunctionDef) and n.returns is not None)
            for n in ast.walk(tree)
        )
        future = any(
            isinstance(n, ast.ImportFrom) and n.module == "__future__" and n.names[0].name == "annotations"
            for n in tree.body
        )
        assert future or not annotated, f"{path.name}: annotations without the __future__ import"


# --- tests use real box clients (LocalTransport, sshd) or the shared stand-ins of tests/boxes.py ---

TESTS = PKG.parent / "tests"
SHARED_BOXES = TESTS / "boxes.py"  # the one home of the box stand-ins (pure rendering, pure logic)
REMOTE_API = {
    "run",
    "read_files",
    "read_file",
    "processes",
    "box_op",
    "stream",
    "forward_local_port",
    "wait_connected",
}


def _remote_stand_ins(root: Path) -> list[str]:
    """Classes that act as a box: two or more Remote API methods, or one on top of another class
    (a derived stand-in).  A proxy around a real client (one method, no base) is not one."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if path == root / "boxes.py":
            continue
        for node in ast.walk(parse_file(path)):
            if not isinstance(node, ast.ClassDef):
                continue
            defined = {f.name for f in node.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)}
            api = defined & REMOTE_API
            if len(api) >= 2 or (api and node.bases):
                found.append(
                    f"{path.relative_to(root.parent).as_posix()}: {node.name} ({', '.join(sorted(api))})"
                )
    return found


def test_no_test_module_defines_its_own_remote_stand_in():
    """A box in a test is a BoxClient over LocalTransport or a real sshd (tests/boxes.py), or one of
    the shared stand-ins there: no test grows a private fake that drifts from the Remote API."""
    assert SHARED_BOXES.is_file()
    assert _remote_stand_ins(TESTS) == []


def test_the_stand_in_checker_sees_one(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(
        "class Fake:\n    async def run(self, argv): ...\n    async def box_op(self, op, args): ...\n"
        "class Derived(Base):\n    def stream(self, argv): ...\n"
        "class Proxy:\n    async def processes(self): ...\n"
    )
    (tmp_path / "tests" / "boxes.py").write_text(
        "class Shared:\n    def run(self): ...\n    def stream(self): ...\n"
    )
    assert _remote_stand_ins(tmp_path / "tests") == [
        "tests/test_x.py: Fake (box_op, run)",
        "tests/test_x.py: Derived (stream)",
    ]


def test_every_tui_table_is_a_measured_table():
    """A plain DataTable shows rows drawn before it measured them at its header's widths until a cell
    changes (Textual #3533: the GPU table stuck at "NVID"); widgets.measured_table is the only way in."""
    plain = []
    for path in sorted((PKG / "tui").rglob("*.py")):
        if path.name == "measured_table.py":
            continue
        for node in ast.walk(parse_file(path)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "DataTable":
                plain.append(f"{path.relative_to(PKG.parent)}:{node.lineno}")
    assert not plain, f"a plain DataTable (use MeasuredTable): {plain}"
