"""Parse a Python file for the static tests (layering, module shape) without a known CPython 3.11 flake.

On 3.11 a finalizer that runs inside ast.parse (an earlier test's leftover asyncio transport, on the
same parallel worker) fails the parse with "AST constructor recursion depth mismatch"; the collector
is paused for the parse so no finalizer can run there.
"""

from __future__ import annotations

import ast
import gc
from pathlib import Path


def parse_file(path: Path, feature_version: tuple[int, int] | None = None) -> ast.Module:
    """The module's tree; feature_version: parse as that Python would (its grammar)."""
    return parse_source(path.read_text(encoding="utf-8"), str(path), feature_version)


def parse_source(
    source: str, filename: str = "<test>", feature_version: tuple[int, int] | None = None
) -> ast.Module:
    """`ast.parse` with the collector paused (see above); every test parses through here."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(source, filename=filename, feature_version=feature_version)
    finally:
        if was_enabled:
            gc.enable()
