"""One error root (issue 23 §3): every error class specdebug defines derives from
SpecdebugError(message, hint), beside the builtin base it had (callers may catch one type; no
existing `except` and no message changes)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from specdebug.errors import SpecdebugError
from tests.pyparse import parse_file

PKG = Path(__file__).resolve().parents[2] / "specdebug"
NOT_ERRORS = {"VerbExit"}  # control flow: an exit code on its way out, not a failure to describe
SKIP = ("box", "sim")  # box code runs on the box (stdlib only); the sim stands in for SGLang/vLLM


def error_classes() -> list[tuple[str, str]]:
    found = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG.parent).with_suffix("")
        if rel.parts[1] in SKIP:
            continue
        for node in parse_file(path).body:
            if isinstance(node, ast.ClassDef) and node.name not in NOT_ERRORS:
                bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases]
                if any(b.endswith(("Error", "Exception", "Refused", "Failed", "Off", "Unsupported",
                                   "File", "Timeout", "Connected", "Dropped")) for b in bases):  # fmt: skip
                    found.append((".".join(rel.parts).removesuffix(".__init__"), node.name))
    return found


def test_there_are_the_families_the_issue_counts() -> None:
    assert len(error_classes()) >= 18


@pytest.mark.parametrize(("module", "name"), error_classes())
def test_every_error_class_has_the_one_root(module: str, name: str) -> None:
    cls = getattr(importlib.import_module(module), name)
    if not issubclass(cls, BaseException):
        pytest.skip("not an exception")
    assert issubclass(cls, SpecdebugError), f"{module}.{name} must derive from SpecdebugError"


def test_the_root_carries_message_and_hint_and_old_families_keep_their_bases() -> None:
    e = SpecdebugError("journal full", "free some disk")
    assert str(e) == e.message == "journal full" and e.hint == "free some disk"
    from specdebug.capability import ReadOnlyError
    from specdebug.core.journal import JournalError
    from specdebug.remote.api import HostSpecError

    denied = ReadOnlyError("launch")
    assert isinstance(denied, PermissionError) and isinstance(denied, SpecdebugError)
    assert str(denied) == "read-only: launch is not allowed in a read-only seat" and denied.hint is None
    full = JournalError(28, "No space left on device")
    assert (
        full.errno == 28 and isinstance(full, OSError) and str(full) == "[Errno 28] No space left on device"
    )
    assert isinstance(HostSpecError("bad"), ValueError)


def test_a_caller_catches_one_type(tmp_path: Path) -> None:
    from specdebug.core.profiles import load_profile

    bad = tmp_path / "bad.toml"
    bad.write_text("name = 'x'\n[server]\nargv = []\n")
    with pytest.raises(SpecdebugError) as got:
        load_profile(bad)
    assert "bad.toml" in str(got.value)
