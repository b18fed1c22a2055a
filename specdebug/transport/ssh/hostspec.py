"""Host specs (`HOST`, `user@HOST`, `user@HOST:PORT`, ssh config alias) and ssh config resolution.

asyncssh reads ssh config itself; we resolve it too because the host-key policy needs the real
HostName, Port and UserKnownHostsFile, and because options asyncssh silently ignores
(StrictHostKeyChecking, ControlMaster, LocalForward...) deserve one warning.
"""

from __future__ import annotations

import getpass
import re
from dataclasses import dataclass, field
from pathlib import Path

import asyncssh
from asyncssh.config import SSHClientConfig

from specdebug.transport.base import HostSpecError

IGNORED_OPTIONS = {
    "stricthostkeychecking": "StrictHostKeyChecking (specdebug always verifies host keys itself)",
    "controlmaster": "ControlMaster (specdebug keeps its own connection per host)",
    "controlpath": "ControlPath",
    "controlpersist": "ControlPersist",
    "localforward": "LocalForward",
    "remoteforward": "RemoteForward",
    "dynamicforward": "DynamicForward",
}


@dataclass
class HostSpec:
    """What the user typed, split, plus the config file to read."""

    text: str
    host: str
    user: str | None = None
    port: int | None = None
    config_path: Path | None = None

    @classmethod
    def parse(cls, text: str, config_path: str | Path | None = None) -> HostSpec:
        m = re.fullmatch(r"(?:(?P<user>[^@\s]+)@)?(?P<host>\[[^\]]+\]|[^:@\s]+)(?::(?P<port>\d+))?", text)
        if not m:
            raise HostSpecError(
                f"bad host spec {text!r}: expected HOST, user@HOST, user@HOST:PORT or an ssh config alias"
            )
        port = int(m["port"]) if m["port"] else None
        if port is not None and not 0 < port < 65536:
            raise HostSpecError(f"bad port in {text!r}")
        cfg = Path(config_path).expanduser() if config_path else None
        if cfg is not None and not cfg.is_file():
            raise HostSpecError(f"ssh config file not found: {cfg}")
        return cls(text=text, host=m["host"].strip("[]"), user=m["user"], port=port, config_path=cfg)


@dataclass
class ResolvedHost:
    """The spec after ssh config: where we really connect and which known_hosts we trust."""

    spec: HostSpec
    hostname: str
    port: int
    user: str
    known_hosts: list[Path]
    keepalive_interval: float | None = None
    proxy_command: str | None = None  # ssh config's ProxyCommand, its %h/%p expanded (proxy.py runs it)
    warnings: list[str] = field(default_factory=list)
    identities: tuple[str, ...] = ()  # the config's IdentityFile/CertificateFile (a login's identity)
    proxy: str = ""  # the config's ProxyJump or ProxyCommand (the way the host is reached)
    ciphers: bool = False  # the config names Ciphers: its choice stands (transport.py)

    @property
    def config_paths(self) -> list[str]:
        if self.spec.config_path:
            return [str(self.spec.config_path)]
        default = Path("~/.ssh/config").expanduser()
        return [str(default)] if default.is_file() else []


def resolve(spec: HostSpec) -> ResolvedHost:
    paths = [str(spec.config_path)] if spec.config_path else []
    if not paths and Path("~/.ssh/config").expanduser().is_file():
        paths = [str(Path("~/.ssh/config").expanduser())]
    local_user = getpass.getuser()
    for path in paths:
        check_includes(Path(path))
    try:
        cfg = SSHClientConfig.load(
            None, paths, False, False, False, local_user, spec.user or (), spec.host, spec.port or ()
        )
    except (OSError, asyncssh.Error, ValueError, RecursionError) as exc:
        where = paths[0] if paths else "ssh config"
        what = "Include nests too deep (a loop?)" if isinstance(exc, RecursionError) else str(exc)
        raise HostSpecError(f"{where}: {what}") from exc
    hostname = str(cfg.get("Hostname", spec.host))
    port = int(str(cfg.get("Port", spec.port or 22)))
    user = str(cfg.get("User", local_user))
    kh = cfg.get("UserKnownHostsFile")
    if kh:
        known = [Path(str(p)).expanduser() for p in (kh if isinstance(kh, list | tuple) else [kh])]
    else:
        known = [Path("~/.ssh/known_hosts").expanduser()]
    interval = cfg.get("ServerAliveInterval")
    proxy_cmd = cfg.get("ProxyCommand")
    warnings = _ignored_option_warnings(paths, spec.host)
    identities = tuple(
        str(Path(str(f)).expanduser())
        for name in ("IdentityFile", "CertificateFile")
        for f in _listed(cfg.get(name))
    )
    route = " ".join(str(cfg.get(name) or "") for name in ("ProxyJump", "ProxyCommand")).strip()
    return ResolvedHost(
        spec=spec,
        hostname=hostname,
        port=port,
        user=user,
        known_hosts=known,
        keepalive_interval=float(str(interval)) if interval else None,
        proxy_command=_proxy_command(proxy_cmd),
        warnings=warnings,
        identities=identities,
        proxy=route,
        ciphers=bool(cfg.get("Ciphers")),
    )


def _proxy_command(value: object) -> str | None:
    """The ProxyCommand as one line; None for none or `none` (OpenSSH's way to switch it off)."""
    if isinstance(value, list | tuple):
        value = " ".join(str(v) for v in value)
    text = str(value).strip() if value else ""
    return text if text and text.lower() != "none" else None


def _listed(value: object) -> list[object]:
    """A config value that may be given once or many times, as a list."""
    if value is None or value == ():
        return []
    return list(value) if isinstance(value, list | tuple) else [value]


MAX_INCLUDE_DEPTH = 16  # OpenSSH's own limit on nested Include


def check_includes(path: Path, stack: tuple[Path, ...] = ()) -> None:
    """Raise HostSpecError for an Include loop or a nesting deeper than OpenSSH allows, naming the
    files (asyncssh would recurse until RecursionError).  Relative Include paths are relative to
    ~/.ssh, as asyncssh and OpenSSH read them."""
    here = path.resolve()
    if here in stack:
        loop = " -> ".join(str(p) for p in (*stack[stack.index(here) :], here))
        raise HostSpecError(f"{stack[-1]}: ssh config Include loop: {loop}")
    if len(stack) >= MAX_INCLUDE_DEPTH:
        raise HostSpecError(f"{stack[-1]}: ssh config Include nests deeper than {MAX_INCLUDE_DEPTH} files")
    try:
        text = here.read_text(errors="replace") if here.is_file() else ""
    except OSError:
        return  # unreadable: asyncssh says why
    for raw in text.splitlines():
        key, _, rest = raw.strip().replace("=", " ", 1).partition(" ")
        if key.lower() != "include":
            continue
        for pattern in rest.split():
            target = Path(pattern).expanduser()
            base = Path(target.anchor) if target.anchor else Path("~/.ssh").expanduser()
            glob = str(Path(*target.parts[1:])) if target.anchor else pattern
            for found in sorted(p for p in base.glob(glob) if p.is_file()):
                check_includes(found, (*stack, here))


def _ignored_option_warnings(paths: list[str], host: str) -> list[str]:
    """Options in the config that asyncssh ignores, for the Host blocks that match `host`."""
    found: dict[str, str] = {}
    for path in paths:
        try:
            text = Path(path).read_text(errors="replace")
        except OSError:
            continue
        applies = True
        for raw in text.splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            key, _, value = line.replace("=", " ", 1).partition(" ")
            k = key.lower()
            if k == "host":
                applies = _host_matches(value.split(), host)
            elif k == "match":
                applies = True  # be conservative: warn about options under Match blocks too
            elif applies and k in IGNORED_OPTIONS:
                found.setdefault(k, f"{path}: {key} is ignored: {IGNORED_OPTIONS[k]}")
    return list(found.values())


def _host_matches(patterns: list[str], host: str) -> bool:
    import fnmatch

    ok = False
    for pat in patterns:
        neg = pat.startswith("!")
        if fnmatch.fnmatch(host, pat.lstrip("!")):
            if neg:
                return False
            ok = True
    return ok
