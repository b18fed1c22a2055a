"""Where the agent's socket lives, and the checks that make it the user's own (stdlib only: the client
imports this on every verb, so it must stay cheap).

The folder is $XDG_RUNTIME_DIR/specdebug, else /tmp/specdebug-agent-UID; it must be a real folder (not a
symlink) owned by the user with no group or other access, or no agent is used at all.  The socket's
name carries a hash of the environment that changes what a verb does (HOME, the ssh agent, config and
data folders, SPECDEBUG_* settings), so two terminals with different settings never share an agent.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

# what a verb's result may depend on besides its argv: an agent is shared only when these agree
ENV_KEYS = ("HOME", "SSH_AUTH_SOCK", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "PATH")


def env_fingerprint(env: dict[str, str] | os._Environ[str] | None = None) -> str:
    """A short hash of the settings that change what a verb does."""
    env = os.environ if env is None else env
    items = [(k, env.get(k, "")) for k in ENV_KEYS]
    items += sorted(
        (k, v) for k, v in env.items() if k.startswith("SPECDEBUG_") and k != "SPECDEBUG_NO_AGENT"
    )
    return hashlib.sha256(repr(items).encode()).hexdigest()[:12]


def runtime_dir(create: bool = True) -> Path | None:
    """The user's private agent folder, or None when it is missing or not safe to use."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    uid = os.getuid()
    folder = Path(base) / "specdebug" if base and os.path.isabs(base) else Path(f"/tmp/specdebug-agent-{uid}")
    if create:
        try:
            folder.mkdir(mode=0o700, exist_ok=True)
        except OSError:
            return None
    return folder if is_private(folder) else None


def is_private(folder: Path) -> bool:
    """A real folder of this user that nobody else can enter or list."""
    try:
        st = folder.lstat()
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


MAX_SOCKET_PATH = 100  # a Unix socket's path must fit sun_path (108 bytes on Linux, 104 elsewhere)


def socket_path(folder: Path, fingerprint: str | None = None) -> Path | None:
    """The socket for this environment in `folder`; None when its path is too long for a socket
    (a deep $XDG_RUNTIME_DIR): then no agent is used."""
    path = folder / f"agent-{fingerprint or env_fingerprint()}.sock"
    return path if len(str(path).encode()) <= MAX_SOCKET_PATH else None


def pid_path(sock: Path) -> Path:
    return sock.with_suffix(".pid")
