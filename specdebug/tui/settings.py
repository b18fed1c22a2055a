"""The user's own settings for the TUI: layout files (TCSS) and the keymap, found and checked here so a
bad file is reported and ignored, never fatal (the app only applies what this module returns)."""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Collection
from pathlib import Path

from platformdirs import user_config_dir

from specdebug.resources import data_dirs

LAYOUT_DIRS = [
    Path(user_config_dir("specdebug")) / "layouts",
    *data_dirs("layouts"),  # the repo's layouts/ (checkout), else the wheel's copy
]
KEYMAP_FILE = Path(user_config_dir("specdebug")) / "keymap.toml"


MAX_SETTINGS_BYTES = 256 << 10  # a layout or keymap is a page of text: a 14 MB file left the TUI blank


def _checked(path: Path) -> Path:
    """`path` if it is a regular file of a sane size, else ValueError naming it and the problem."""
    size = path.stat().st_size
    if size > MAX_SETTINGS_BYTES:
        raise ValueError(f"layout {path} is {size} bytes, more than a layout may be ({MAX_SETTINGS_BYTES})")
    return path


def find_layout(name: str) -> Path:
    if name.endswith(".tcss") and Path(name).is_file():
        return _checked(Path(name))
    for d in LAYOUT_DIRS:
        candidate = d / f"{name}.tcss"
        if candidate.is_file():
            return _checked(candidate)
    known = sorted({p.stem for d in LAYOUT_DIRS if d.is_dir() for p in d.glob("*.tcss")})
    raise ValueError(f"layout {name!r} not found (known: {', '.join(known) or 'none'})")


class KeymapFile(dict[str, str]):
    """binding id -> keys, plus `problems`: what was wrong with the file (shown as notifications)."""

    def __init__(self, entries: dict[str, str] | None = None, problems: list[str] | None = None) -> None:
        super().__init__(entries or {})
        self.problems = problems or []


def load_keymap(path: Path = KEYMAP_FILE, known: Collection[str] | None = None) -> KeymapFile:
    """`[keymap]` table of binding id -> keys; a bad file or entry is reported and ignored, never fatal.
    With `known` (the app's binding ids), an id no binding has is an error naming the file and the
    field: Textual would ignore it silently, and the user would wonder why the key does nothing."""
    try:
        if not path.is_file():
            return KeymapFile()
        if path.stat().st_size > MAX_SETTINGS_BYTES:
            raise ValueError(f"{path.stat().st_size} bytes, more than a keymap may be ({MAX_SETTINGS_BYTES})")
        with path.open("rb") as f:
            data = tomllib.load(f)
    except (OSError, ValueError, RecursionError) as exc:  # TOMLDecodeError is a ValueError
        return KeymapFile(problems=[f"keymap {path} ignored: {exc or type(exc).__name__}"])
    table = data.get("keymap", data)
    if not isinstance(table, dict):
        return KeymapFile(
            problems=[f'keymap {path} ignored: `keymap` must be a table like [keymap] "bench.run" = "ctrl+b"']
        )
    good = {str(k): v for k, v in table.items() if isinstance(v, str) and v.strip()}
    bad = [str(k) for k in table if str(k) not in good]
    problems = [f"keymap {path}: entries without a key string ignored: {', '.join(bad)}"] if bad else []
    for name in [k for k in good if known is not None and k not in known]:
        del good[name]
        close = difflib.get_close_matches(name, sorted(known or ()), n=1)
        guess = f"; did you mean {close[0]!r}?" if close else " (the ids are listed by `?` in the TUI)"
        problems.append(f"keymap {path}: [keymap] {name!r}: no key binding has this id, ignored{guess}")
    return KeymapFile(good, problems)
