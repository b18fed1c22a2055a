"""Server profiles: one TOML file says how to start a server, when it is ready, how to benchmark it.

Profiles are compared more than they are edited: "2 steps with the NCCL env" vs "3 steps
without".  So besides loading and validating, this module turns a profile into *knobs* (one
CLI flag or one env var each) and diffs two profiles into the knobs that differ, as data a
bisection can apply one at a time.

Errors are for humans fixing a file: every `ProfileError` names the file, the line and the
field, in one line (`path:line: field: what is wrong`).  `extends` chains are resolved here
(relative to the extending file; later keys override, tables merge), so the line reported is
the one in the file that actually set the offending value.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from specdebug.core.fingerprint import PLUMBING_FLAGS, config_fingerprint, split_argv

Kind = Literal["sglang", "vllm", "custom"]
DEFAULT_PORTS: dict[str, int] = {"sglang": 30000, "vllm": 8000}
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ProfileError(Exception):
    """A profile that cannot be used; str() is one line: `file:line: field: message`."""

    def __init__(
        self,
        message: str,
        *,
        file: Path | str | None = None,
        line: int | None = None,
        field: str | None = None,
    ):
        self.file = Path(file) if file is not None else None
        self.line = line
        self.field = field
        self.detail = message
        where = str(self.file) if self.file is not None else "<profile>"
        if line is not None:
            where += f":{line}"
        super().__init__(f"{where}: {field}: {message}" if field else f"{where}: {message}")
        self.problems: list[ProfileError] = [self]  # every problem found in the file, this one first


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class ServerSpec(_Strict):
    """How to start the server on the box."""

    argv: list[str] = Field(min_length=1, description="Command line, one list item per argument.")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment for the server.")
    cwd: str | None = Field(default=None, description="Working directory on the box (~ allowed).")
    log_file: str = Field(default="", description="Log path on the box; default /tmp/specdebug/<name>.log.")
    port: int = Field(
        default=0, ge=0, le=65535, description="HTTP port; default from --port in argv or kind."
    )
    kind: Kind = Field(default="sglang", description="Picks the built-in phase/error/metric patterns.")
    spt_noenv: bool = Field(
        default=True,
        description="Launch with SPT_NOENV=1 so setproctitle leaves workers' /proc/PID/environ readable.",
    )

    @field_validator("env")
    @classmethod
    def _env_names(cls, env: dict[str, str]) -> dict[str, str]:
        for key in env:
            if not _ENV_NAME_RE.match(key):
                raise ValueError(f"invalid environment variable name {key!r}")
        return env

    @field_validator("argv")
    @classmethod
    def _argv_nonempty(cls, argv: list[str]) -> list[str]:
        if not argv[0].strip():
            raise ValueError("the first argument (the program) is empty")
        return argv


class ReadySpec(_Strict):
    """When the server counts as ready."""

    health: str = Field(default="/health", description="HTTP path polled on the box until it answers 200.")
    require_ready_line: bool = Field(
        default=True, description="Also wait for the kind's ready line in the log (SGLang: 'fired up')."
    )
    timeout_s: float = Field(default=900.0, gt=0, description="Give up (verdict failed) after this long.")

    @field_validator("health")
    @classmethod
    def _path(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError("must be a path starting with '/'")
        return value


class WorkersSpec(_Strict):
    """Which descendants of the server are its workers (for the env/process views)."""

    match: str | None = Field(default=None, description="Regex over /proc/PID/cmdline of descendants.")

    @field_validator("match")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"invalid regex: {exc}") from None
        return value


class BenchSpec(_Strict):
    """How to benchmark: the built-in client's parameters, or an external command."""

    command: list[str] | None = Field(
        default=None, description="External benchmark argv run on the box instead of the built-in client."
    )
    requests: int = Field(default=16, ge=1)
    concurrency: int = Field(default=1, ge=1)
    input_len: int = Field(default=512, ge=1)
    output_len: int = Field(default=256, ge=1)
    seed: int = 0
    warmup_requests: int = Field(default=1, ge=0)
    temperature: float = Field(default=0.0, ge=0)
    ignore_eos: bool = True
    endpoint: str = Field(default="/v1/completions", description="OpenAI-compatible endpoint to hit.")
    model: str | None = Field(default=None, description="Model name sent in requests; default from server.")
    timeout_s: float = Field(default=600.0, gt=0)


class KnobValue(BaseModel):
    """One CLI flag or env var of a profile; `tokens` are the flag's argv values (none for a switch)."""

    name: str
    kind: Literal["flag", "env", "command"]
    value: str | None
    tokens: list[str] = Field(default_factory=list)
    switch: bool = False


class Knob(BaseModel):
    """One difference between two profiles: a flag or env var with A's and B's value (None = absent).

    A boolean flag present shows as value "(set)" with `switch_*` true; `tokens_*` hold the argv
    values so a bisection can rebuild the command line exactly.
    """

    name: str
    kind: Literal["flag", "env", "command"]
    value_a: str | None
    value_b: str | None
    tokens_a: list[str] | None = None
    tokens_b: list[str] | None = None
    switch_a: bool = False
    switch_b: bool = False

    def describe(self) -> str:
        return f"{self.name}: {_show(self.value_a)} -> {_show(self.value_b)}"


SWITCH_SHOWN = "(set)"


def _show(value: str | None) -> str:
    return "(absent)" if value is None else repr(value) if value != SWITCH_SHOWN else value


class Profile(_Strict):
    """A resolved profile (extends applied, defaults filled)."""

    name: str = Field(description="Profile name; also names the server's state file on the box.")
    source: Path | None = Field(default=None, exclude=True, description="File it was loaded from.")
    extends_chain: list[Path] = Field(default_factory=list, exclude=True)
    description: str = ""
    server: ServerSpec
    ready: ReadySpec = Field(default_factory=ReadySpec)
    workers: WorkersSpec = Field(default_factory=WorkersSpec)
    patterns: dict[str, str] = Field(
        default_factory=dict,
        description="Extra metric regexes for logs: name -> regex with a named numeric group (?P<value>...).",
    )
    bench: BenchSpec = Field(default_factory=BenchSpec)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME_RE.match(value):
            raise ValueError("use letters, digits, '.', '_' and '-' only (it names a file on the box)")
        return value

    @field_validator("patterns")
    @classmethod
    def _patterns(cls, patterns: dict[str, str]) -> dict[str, str]:
        for key, rx in patterns.items():
            try:
                compiled = re.compile(rx)
            except re.error as exc:
                raise ValueError(f"pattern {key!r}: invalid regex: {exc}") from None
            if "value" not in compiled.groupindex:
                raise ValueError(f"pattern {key!r} needs a named group (?P<value>...)")
        return patterns

    @model_validator(mode="after")
    def _fill_defaults(self) -> Profile:
        srv = self.server
        if not srv.log_file:
            srv.log_file = f"/tmp/specdebug/{self.name}.log"
        argv_port = _argv_port(srv.argv)
        if srv.port == 0:
            if argv_port is not None:
                srv.port = argv_port
            elif srv.kind in DEFAULT_PORTS:
                srv.port = DEFAULT_PORTS[srv.kind]
            else:
                raise ValueError("server.port: required for kind 'custom' (or put --port in argv)")
        elif argv_port is not None and argv_port != srv.port:
            raise ValueError(f"server.port: {srv.port} disagrees with --port {argv_port} in server.argv")
        return self

    # -- identity and knobs ------------------------------------------------------------

    def fingerprint(self) -> str:
        """The config's one fingerprint (specdebug.core.fingerprint): its knobs and kind, not its placement.

        Moving a server to another port or log file does not make it another experiment."""
        return config_fingerprint(self.server.argv, self.server.env, self.server.kind)

    def knobs(self) -> list[KnobValue]:
        """The profile as knobs: the command prefix, each CLI flag, each env var (sorted)."""
        prefix, flags = split_argv(self.server.argv)
        out = [KnobValue(name="(command)", kind="command", value=" ".join(prefix), tokens=prefix)]
        for name, tokens in flags:
            switch = not tokens
            out.append(
                KnobValue(
                    name=name,
                    kind="flag",
                    value=SWITCH_SHOWN if switch else " ".join(tokens),
                    tokens=tokens,
                    switch=switch,
                )
            )
        for key in sorted(self.server.env):
            out.append(KnobValue(name=key, kind="env", value=self.server.env[key]))
        return out

    def with_knobs(self, knobs: list[Knob], side: Literal["a", "b"] = "b") -> Profile:
        """A copy with each knob set to its `side` value (absent = removed): bisection applies B's knobs to A."""
        prefix, flags = split_argv(self.server.argv)
        flag_map = dict(flags)
        order = [n for n, _ in flags]
        env = dict(self.server.env)
        for knob in knobs:
            value = knob.value_b if side == "b" else knob.value_a
            tokens = knob.tokens_b if side == "b" else knob.tokens_a
            if knob.kind == "command":
                prefix = list(tokens or [])
            elif knob.kind == "env":
                if value is None:
                    env.pop(knob.name, None)
                else:
                    env[knob.name] = value
            elif value is None:
                flag_map.pop(knob.name, None)
            else:
                if knob.name not in flag_map:
                    order.append(knob.name)
                flag_map[knob.name] = list(tokens or [])
        argv = list(prefix)
        for name in order:
            if name in flag_map:
                argv.append(name)
                argv.extend(flag_map[name])
        server = self.server.model_copy(update={"argv": argv, "env": env})
        return self.model_copy(update={"server": server})


def _argv_port(argv: list[str]) -> int | None:
    _, flags = split_argv(argv)
    for name, values in flags:
        if name == "--port" and len(values) == 1 and values[0].isdigit():
            return int(values[0])
    return None


def diff_profiles(a: Profile, b: Profile, *, include_plumbing: bool = False) -> list[Knob]:
    """The knobs whose values differ between A and B: command, flags (A's order, then B's new), env.

    Plumbing flags (PLUMBING_FLAGS) are skipped unless asked for: they differ between any two
    profiles meant to run side by side and are never the cause of a performance difference.
    """

    def keep(k: KnobValue) -> bool:
        return include_plumbing or not (k.kind == "flag" and k.name in PLUMBING_FLAGS)

    ka = {(k.kind, k.name): k for k in a.knobs() if keep(k)}
    kb = {(k.kind, k.name): k for k in b.knobs() if keep(k)}
    keys = list(ka) + [k for k in kb if k not in ka]
    rank = {"command": 0, "flag": 1, "env": 2}
    keys.sort(key=lambda k: rank[k[0]])  # stable: keeps argv order within flags
    out: list[Knob] = []
    for key in keys:
        x, y = ka.get(key), kb.get(key)
        if x is not None and y is not None and x.tokens == y.tokens and x.value == y.value:
            continue
        out.append(
            Knob(
                name=key[1],
                kind=key[0],
                value_a=x.value if x else None,
                value_b=y.value if y else None,
                tokens_a=x.tokens if x else None,
                tokens_b=y.tokens if y else None,
                switch_a=bool(x and x.switch),
                switch_b=bool(y and y.switch),
            )
        )
    return out


def profile_schema() -> dict[str, Any]:
    """JSON schema of the profile file format (the TOML keys), generated from the model."""
    schema = Profile.model_json_schema()
    schema["properties"]["extends"] = {
        "type": "string",
        "description": "Base profile file, relative to this one; later keys override, tables merge.",
    }
    schema["properties"].pop("source", None)
    schema["properties"].pop("extends_chain", None)
    schema["properties"]["name"]["description"] += " Defaults to the file name without .toml."
    schema["required"] = ["server"]
    schema["title"] = "specdebug server profile"
    return schema


# -- loading -----------------------------------------------------------------------------

_TOP_KEYS = {"name", "extends", "description", "server", "ready", "workers", "patterns", "bench"}


class _Source:
    """One file of an extends chain: its path and text, for line lookups."""

    def __init__(self, path: Path, text: str):
        self.path = path
        self.text = text


def load_profile(path: str | Path) -> Profile:
    """Load, resolve `extends` and validate a profile file; raises ProfileError."""
    path = Path(path).expanduser()
    provenance: dict[tuple[str, ...], _Source] = {}
    raw, top = _load_chain(path, [], provenance)
    raw.pop("extends", None)
    chain = top["chain"]
    if "name" not in top["raw"]:
        raw["name"] = path.stem
    try:
        profile = Profile.model_validate(raw)
    except ValidationError as exc:
        raise _translate(exc, top["src"], provenance) from None
    profile.source = path
    profile.extends_chain = chain
    return profile


def load_profile_text(text: str, path: str | Path = "<profile>.toml") -> Profile:
    """Validate profile text given directly (tests, the TUI's editor); `extends` is relative to path."""
    path = Path(path)
    src = _Source(path, text)
    raw = _parse(src)
    provenance: dict[tuple[str, ...], _Source] = {}
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


def _load_chain(path: Path, stack: list[Path], provenance: dict) -> tuple[dict[str, Any], dict]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProfileError("file not found", file=path) from None
    except OSError as exc:
        raise ProfileError(f"cannot read: {exc.strerror or exc}", file=path) from None
    src = _Source(path, text)
    raw = _parse(src)
    chain: list[Path] = []
    merged = _resolve_extends(raw, src, [*stack, path.resolve()], provenance, chain)
    return merged, {"raw": raw, "src": src, "chain": chain}


def _resolve_extends(
    raw: dict[str, Any], src: _Source, stack: list[Path], provenance: dict, chain: list[Path] | None = None
) -> dict:
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
        base, info = _load_chain(target, stack, provenance)
        if chain is not None:
            chain.extend([target, *info["chain"]])
        base.pop("name", None)  # a name is never inherited: each file names itself
        base.pop("extends", None)
    _record(raw, (), src, provenance)
    return _merge(base, raw)


def _record(data: dict[str, Any], prefix: tuple[str, ...], src: _Source, provenance: dict) -> None:
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


def _translate(exc: ValidationError, top: _Source, provenance: dict) -> ProfileError:
    """Every pydantic error as one line naming the file and line that set the value; the first
    is raised, all of them are in its `problems`.

    Unknown keys come first: `argz = [...]` is a typo of argv, so "unknown key 'argz'" explains
    the "missing argv" that follows from it."""
    errors = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
    problems = [_translate_one(e, top, provenance) for e in errors]
    problems[0].problems = problems
    return problems[0]


def _translate_one(err: Any, top: _Source, provenance: dict) -> ProfileError:
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
        model = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None
    if model is None:
        return []
    names = [n for n in model.model_fields if n not in ("source", "extends_chain")]
    if model is Profile:
        names.append("extends")
    return sorted(names)


_HEADER_RE = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY_RE = re.compile(
    r"""^\s*((?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*'))*)\s*="""
)


def _split_dotted(key: str) -> tuple[str, ...]:
    parts = re.findall(r"""[A-Za-z0-9_-]+|"[^"]*"|'[^']*'""", key)
    return tuple(p[1:-1] if p[:1] in "\"'" else p for p in parts)


def find_key_line(text: str, path: tuple[str, ...]) -> int | None:
    """1-based line where the key at `path` is set, by scanning table headers and `key =` lines.

    Falls back to the closest enclosing definition (an inline table, or the table header), so a
    missing key is reported at its table.  Good enough for error messages; not a TOML parser.
    """
    table: tuple[str, ...] = ()
    best: tuple[int, int] | None = None  # (matched length, line)
    in_multiline = False
    for no, line in enumerate(text.splitlines(), start=1):
        if in_multiline:
            if line.count('"""') % 2 == 1 or line.count("'''") % 2 == 1:
                in_multiline = False
            continue
        m = _HEADER_RE.match(line)
        if m:
            table = _split_dotted(m.group(1))
            full = table
        else:
            km = _KEY_RE.match(line)
            if not km:
                continue
            full = table + _split_dotted(km.group(1))
            rest = line[km.end() :]
            if rest.count('"""') % 2 == 1 or rest.count("'''") % 2 == 1:
                in_multiline = True
            if path[: len(full)] == full and len(path) > len(full):
                # inline table or array holding the key: look for the key name on this line
                inner = path[len(full)]
                if re.search(rf"(^|[{{,\s]){re.escape(inner)}\s*=|[\"']{re.escape(inner)}[\"']\s*=", rest):
                    return no
        if full == path:
            return no
        if path[: len(full)] == full and (best is None or len(full) > best[0]):
            best = (len(full), no)
    return best[1] if best else None
