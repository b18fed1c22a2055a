"""docs/architecture.md is the module map; it must say what the modules' docstrings say today."""

from __future__ import annotations

from tests.archmap import DOC, render


def test_architecture_doc_is_in_sync_with_the_docstrings():
    assert DOC.read_text(encoding="utf-8") == render(), "stale map: run `python -m tests.archmap`"
