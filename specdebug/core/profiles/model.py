"""The profile models: what a server profile may say, validated by pydantic (strict: unknown keys fail).

Kept apart from loading so the rules for a valid profile read in one place; a Profile also turns
itself into knobs and back (see diff.py for what a knob is).
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from specdebug.core.fingerprint import config_fingerprint, normal_cwd, server_host, split_argv
from specdebug.core.model import Model
from specdebug.core.profiles.deployment import DeploymentSpec
from specdebug.core.profiles.diff import SWITCH_SHOWN, Knob, KnobValue
from specdebug.engines import DEFAULT_ENGINE, ENGINES, EngineName
from specdebug.errors import SpecdebugError
from specdebug.remote.shell import is_env_name

Kind = Literal[EngineName, "custom"]  # an engine of the registry, or a server without one (one Literal)
DEFAULT_PORTS: dict[str, int] = {name: engine.default_port for name, engine in ENGINES.items()}
NAME_MAX = 200  # the box's state file is NAME.json (+ a temp suffix): within a file name's 255 bytes
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class ProfileError(SpecdebugError):
    """A profile that cannot be used; str() is one line: `file:line: field: message`.  A config error
    (exit 2); its hint names the command that lists every problem of the file at once."""

    exit_code = 2

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
        super().__init__(
            f"{where}: {field}: {message}" if field else f"{where}: {message}",
            f"specdebug profile check {shlex.quote(str(self.file))} lists every problem; "
            "specdebug profile schema shows the fields"
            if self.file is not None and message != "file not found"
            else None,
        )
        self.problems: list[ProfileError] = [self]  # every problem found in the file, this one first


def default_log_dir() -> str:
    """Where a profile without `log_file` logs ON THE BOX: `logs/` in the folder of server records
    ($SPECDEBUG_STATE_DIR, else ~/.specdebug/servers; `~` is the box user's), created 0700 by the
    launch.  Not a shared folder such as /tmp/specdebug: another user could plant it (or a symlink
    in it) and get the server's output appended to a file of ours, or forge the log we read."""
    state = os.environ.get("SPECDEBUG_STATE_DIR") or "~/.specdebug/servers"
    return f"{state.rstrip('/')}/logs"


class _Strict(Model):
    model_config = ConfigDict(extra="forbid", strict=True)


class ServerSpec(_Strict):
    """How to start the server on the box."""

    argv: list[str] = Field(min_length=1, description="Command line, one list item per argument.")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment for the server.")
    cwd: str | None = Field(default=None, description="Working directory on the box (~ allowed).")
    log_file: str = Field(
        default="", description="Log path on the box; default <state folder>/logs/<name>.log (ours, 0700)."
    )
    port: int = Field(
        default=0, ge=0, le=65535, description="HTTP port; default from --port in argv or kind."
    )
    kind: Kind = Field(default=DEFAULT_ENGINE, description="Picks the built-in phase/error/metric patterns.")
    spt_noenv: bool = Field(
        default=True,
        description="Launch with SPT_NOENV=1 so setproctitle leaves workers' /proc/PID/environ readable.",
    )

    @property
    def listen_host(self) -> str:
        """Where on the box the server answers (server_host of its argv)."""
        return server_host(self.argv)

    @field_validator("env")
    @classmethod
    def _env_names(cls, env: dict[str, str]) -> dict[str, str]:
        for key in env:
            if not is_env_name(key):
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
        default=True,
        description="Also wait for the kind's ready line in the log (its engine's, e.g. 'fired up').",
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
    deployment: DeploymentSpec | None = Field(
        default=None, description="The nodes one server spans (core.deployment); absent: one box."
    )

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME_RE.match(value):
            raise ValueError("use letters, digits, '.', '_' and '-' only (it names a file on the box)")
        if len(value) > NAME_MAX:  # what launch's server record refuses, refused here (profile check too)
            raise ValueError(f"{len(value)} characters, over {NAME_MAX} (it names a file on the box)")
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
            srv.log_file = f"{default_log_dir()}/{self.name}.log"
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
        return config_fingerprint(self.server.argv, self.server.env, self.server.kind, self.server.cwd)

    def knobs(self) -> list[KnobValue]:
        """The profile as knobs: the command prefix, each CLI flag, each env var (sorted)."""
        prefix, flags = split_argv(self.server.argv)
        out = [KnobValue(name="(command)", kind="command", value=" ".join(prefix), tokens=prefix)]
        if normal_cwd(self.server.cwd) is not None:  # the source it runs from (a worktree)
            out.append(KnobValue(name="(cwd)", kind="cwd", value=normal_cwd(self.server.cwd)))
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
        cwd = self.server.cwd
        for knob in knobs:
            value = knob.value_b if side == "b" else knob.value_a
            tokens = knob.tokens_b if side == "b" else knob.tokens_a
            if knob.kind == "command":
                prefix = list(tokens or [])
            elif knob.kind == "cwd":
                cwd = value
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
        server = self.server.model_copy(update={"argv": argv, "env": env, "cwd": cwd})
        return self.model_copy(update={"server": server})


def _argv_port(argv: list[str]) -> int | None:
    _, flags = split_argv(argv)
    for name, values in flags:
        if name == "--port" and len(values) == 1 and values[0].isdigit():
            return int(values[0])
    return None


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
