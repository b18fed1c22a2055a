"""Loading profiles: TOML parsing, `extends` chains with provenance, and errors that name the file,
line and field that actually set a bad value.
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from pathlib import Path
from typing import Any, NamedTuple, get_args

from pydantic import BaseModel, ValidationError

from specdebug.core.profiles.lines import find_key_line
from specdebug.core.profiles.model import Profile, ProfileError

# -- loading -----------------------------------------------------------------------------

_TOP_KEYS = {
    "name",
    "extends",
    "description",
    "server",
    "ready",
    "workers",
    "patterns",
    "bench",
    "deployment",
}


class _Source:
    """One file of an extends chain: its path and text, for line lookups."""

    def __init__(self, path: Path, text: str):
        self.path = path
        self.text = text


# which file set each key path: errors point at the file and line that set a bad value
_Provenance = dict[tuple[str, ...], _Source]


class _Chain(NamedTuple):
    """The top file of an `extends` chain: its own table, its source, the files it extends."""

    raw: dict[str, Any]
    src: _Source
    chain: list[Path]


def load_profile(path: str | Path) -> Profile:
    """Load, resolve `extends` and validate a profile file; raises ProfileError."""
    path = Path(path).expanduser()
    provenance: _Provenance = {}
    raw, top = _load_chain(path, [], provenance)
    raw.pop("extends", None)
    chain = top.chain
    if "name" not in top.raw:
        raw["name"] = path.stem
    try:
        profile = Profile.model_validate(raw)
    except ValidationError as exc:
        raise _translate(exc, top.src, provenance) from None
    profile.source = path
    profile.extends_chain = chain
    return profile


def load_profile_text(text: str, path: str | Path = "<profile>.toml") -> Profile:
    """Validate profile text given directly (tests, the TUI's editor); `extends` is relative to path."""
    path = Path(path)
    src = _Source(path, text)
    raw = _parse(src)
    provenance: _Provenance = {}
    merged = _resolve_extends(raw, src, [path.resolve()], provenance)
    merged.pop("extends", None)
    if "name" not in raw:
        merged["name"] = path.stem
    try:
        return Profile.model_validate(merged)
    except ValidationError as exc:
        raise _translate(exc, src, provenance) from None


MAX_DEPTH = 32  # tables/arrays nested deeper than any real profile: refused before anything recurses


def _parse(src: _Source) -> dict[str, Any]:
    try:
        data = tomllib.loads(src.text)
    except RecursionError:
        raise ProfileError(
            f"invalid TOML: nested deeper than Python can parse (a profile needs at most {MAX_DEPTH} levels)",
            file=src.path,
        ) from None
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
        line = int(m.group(1)) if m else getattr(exc, "lineno", None)
        detail = re.sub(r"\s*\(at line \d+, column \d+\)", "", msg)
        if m:
            detail += f" (column {m.group(2)})"
        raise ProfileError(f"invalid TOML: {detail}", file=src.path, line=line) from None
    deep = _too_deep(data, MAX_DEPTH)
    if deep is not None:
        raise ProfileError(
            f"nested more than {MAX_DEPTH} levels deep (a profile needs a few)",
            file=src.path,
            line=find_key_line(src.text, (deep,)),
            field=deep,
        )
    # unknown keys are reported by validation, together with every other problem of the file
    return data


def _too_deep(data: Any, limit: int) -> str | None:
    """The top-level key under which `data` nests deeper than `limit`, else None (iterative: no recursion)."""
    for key, value in data.items():
        stack = [(value, 1)]
        while stack:
            item, depth = stack.pop()
            if depth > limit:
                return str(key)
            if isinstance(item, dict):
                stack.extend((v, depth + 1) for v in item.values())
            elif isinstance(item, list):
                stack.extend((v, depth + 1) for v in item)
    return None


MAX_PROFILE_BYTES = 8 << 20  # a profile is pages of TOML (10^5 env vars: 2 MB); /dev/zero is none
_KINDS = {
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a directory",
}


def _not_a_profile_file(path: Path) -> str | None:
    """Why `path` cannot be read as a profile (None: a regular file of a sane size, or missing)."""
    try:
        st = path.stat()
    except OSError:
        return None  # missing or unreadable: the read says which
    if not stat.S_ISREG(st.st_mode):
        return f"{path} is {_KINDS.get(stat.S_IFMT(st.st_mode), 'not a regular file')}, not a regular file"
    if st.st_size > MAX_PROFILE_BYTES:
        return f"{path} is {st.st_size} bytes, more than a profile may be ({MAX_PROFILE_BYTES})"
    return None


def _read_bounded(path: Path) -> str:
    """The file's text, never more than MAX_PROFILE_BYTES (it may have grown since the check);
    O_NONBLOCK: a FIFO swapped in meanwhile cannot hang the read."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(0, "not a regular file")
        data = os.read(fd, MAX_PROFILE_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_PROFILE_BYTES:
        raise OSError(0, f"more than a profile may be ({MAX_PROFILE_BYTES} bytes)")
    return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")  # as read_text does


def _load_chain(path: Path, stack: list[Path], provenance: _Provenance) -> tuple[dict[str, Any], _Chain]:
    why = _not_a_profile_file(path)
    if why is not None:
        raise ProfileError(why, file=path)
    try:
        text = _read_bounded(path)
    except FileNotFoundError:
        raise ProfileError("file not found", file=path) from None
    except OSError as exc:
        raise ProfileError(f"cannot read: {exc.strerror or exc}", file=path) from None
    except UnicodeDecodeError:
        raise ProfileError("not UTF-8 text", file=path) from None
    src = _Source(path, text)
    raw = _parse(src)
    chain: list[Path] = []
    merged = _resolve_extends(raw, src, [*stack, path.resolve()], provenance, chain)
    return merged, _Chain(raw, src, chain)


def _resolve_extends(
    raw: dict[str, Any],
    src: _Source,
    stack: list[Path],
    provenance: _Provenance,
    chain: list[Path] | None = None,
) -> dict[str, Any]:
    """Merge the extended file(s) under `raw`; `chain` collects the base files, nearest first."""
    base: dict[str, Any] = {}
    ext = raw.get("extends")
    if ext is not None:
        line = find_key_line(src.text, ("extends",))
        if not isinstance(ext, str):
            raise ProfileError(
                f"must be a file name (string), got {_tname(ext)}", file=src.path, line=line, field="extends"
            )
        target = (src.path.parent / Path(ext).expanduser()).resolve()
        if target in stack:
            cycle = " -> ".join(p.name for p in [*stack[stack.index(target) :], target])
            raise ProfileError(f"extends cycle: {cycle}", file=src.path, line=line, field="extends")
        if not target.exists():
            raise ProfileError(
                f"extended profile {ext!r} not found ({target})", file=src.path, line=line, field="extends"
            )
        why = _not_a_profile_file(target)
        if why is not None:
            raise ProfileError(f"{ext!r}: {why}", file=src.path, line=line, field="extends")
        base, info = _load_chain(target, stack, provenance)
        if chain is not None:
            chain.extend([target, *info.chain])
        base.pop("name", None)  # a name is never inherited: each file names itself
        base.pop("extends", None)
    _record(raw, (), src, provenance)
    return _merge(base, raw)


def _record(data: dict[str, Any], prefix: tuple[str, ...], src: _Source, provenance: _Provenance) -> None:
    for key, value in data.items():
        path = (*prefix, key)
        provenance[path] = src
        if isinstance(value, dict):
            _record(value, path, src, provenance)


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _tname(value: Any) -> str:
    return {
        str: "a string",
        int: "an integer",
        float: "a float",
        bool: "a boolean",
        list: "an array",
        dict: "a table",
    }.get(type(value), type(value).__name__)


def _translate(exc: ValidationError, top: _Source, provenance: _Provenance) -> ProfileError:
    """Every pydantic error as one line naming the file and line that set the value; the first
    is raised, all of them are in its `problems`.

    Unknown keys come first: `argz = [...]` is a typo of argv, so "unknown key 'argz'" explains
    the "missing argv" that follows from it."""
    errors = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
    problems = [_translate_one(e, top, provenance) for e in errors]
    problems[0].problems = problems
    return problems[0]


def _translate_one(err: Any, top: _Source, provenance: _Provenance) -> ProfileError:
    loc = tuple(str(p) for p in err["loc"])
    key_loc = tuple(p for p in loc if not p.isdigit())
    field = ".".join(loc) if loc else None
    etype = err["type"]
    # find the most specific key path that some file set
    src = None
    for n in range(len(key_loc), 0, -1):
        if key_loc[:n] in provenance:
            src = provenance[key_loc[:n]]
            break
    src = src or top
    line = find_key_line(src.text, key_loc) if key_loc else None
    if etype == "extra_forbidden":
        table = ".".join(loc[:-1])
        known = _known_keys(loc[:-1])
        msg = f"unknown key {loc[-1]!r}" + (f" in [{table}]" if table else "")
        if known:
            msg += f" (known: {', '.join(known)})"
    elif etype == "missing":
        table = ".".join(loc[:-1])
        msg = f"missing required key {loc[-1]!r}" + (f" in [{table}]" if table else "")
        if loc == ("server",):
            msg = "missing required table [server] (with at least argv = [...])"
    elif etype.endswith("_type") or etype in ("literal_error", "model_type", "dict_type", "list_type"):
        got = err.get("input")
        expected = err["msg"].replace("Input should be ", "")
        msg = f"wrong type: expected {expected}, got {_tname(got)}"
        if etype == "literal_error":
            msg = f"must be {expected}, got {got!r}"
    else:
        msg = err["msg"].removeprefix("Value error, ")
        if etype == "too_short" and loc and loc[-1] == "argv":
            msg = 'must not be empty: give the command line as a list, e.g. argv = ["python3", ...]'
    if etype == "value_error" and not loc:
        # model-level check (e.g. port): point at the key it talks about
        for word, path in (("server.port", ("server", "port")),):
            if msg.startswith(word + ": "):
                field, msg = word, msg[len(word) + 2 :]
                src = provenance.get(path, top)
                line = find_key_line(src.text, path) or find_key_line(src.text, ("server",))
    return ProfileError(msg, file=src.path, line=line or None, field=field)


def _known_keys(table: tuple[str, ...]) -> list[str]:
    model: type[BaseModel] | None = Profile
    for part in table:
        info = model.model_fields.get(part) if model else None
        ann = info.annotation if info else None
        # an optional table (`deployment: DeploymentSpec | None`) names its model inside the union
        options = [ann, *get_args(ann)]
        model = next((a for a in options if isinstance(a, type) and issubclass(a, BaseModel)), None)
    if model is None:
        return []
    names = [n for n in model.model_fields if n not in ("source", "extends_chain")]
    if model is Profile:
        names.append("extends")
    return sorted(names)
