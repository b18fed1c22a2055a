"""Where the agent's socket lives, and the checks that make it the user's own (stdlib only: the client
imports this on every verb, so it must stay cheap).

The folder is $XDG_RUNTIME_DIR/specdebug, else /tmp/specdebug-agent-UID; it must be a real folder (not a
symlink) owned by the user with no group or other access, or no agent is used at all (`folder_problem`
says why, for `agent status`).  The socket's name carries a hash of the environment that changes what
a verb does (HOME, the user's name, the ssh agent, config and data folders, Slurm's and kubectl's
settings, SPECDEBUG_* settings), so two terminals with different settings never share an agent: a
verb the agent runs sees the caller's environment where it matters.  The agent also checks the values
themselves on each request (`caller_env`), and the code and interpreter it runs (`code_identity`):
an agent of other code (an upgrade, an edited checkout) or another Python is replaced, not asked.
"""

from __future__ import annotations

import os
import stat
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy takes the name as True)

if TYPE_CHECKING:  # nothing here imports pathlib or typing's collections at run time: the client is one
    from collections.abc import Mapping  # socket round trip and its imports are most of its cost
    from pathlib import Path

# what a verb's result may depend on besides its argv: an agent is shared only when these agree.
# USER/LOGNAME: ssh's default login name (getpass); SLURM_CONF and the client commands' own settings:
# which cluster `slurm:JOB` asks; KUBECONFIG: which cluster kubectl asks; KRB5CCNAME: GSSAPI logins
ENV_KEYS = (
    "HOME",
    "USER",
    "LOGNAME",
    "SSH_AUTH_SOCK",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "PATH",
    "TMPDIR",
    "KUBECONFIG",
    "KRB5CCNAME",
)
ENV_PREFIXES = ("SPECDEBUG_", "SLURM_", "SQUEUE_", "SCONTROL_", "SINFO_", "SBATCH_", "SALLOC_", "SRUN_")
NOT_ENV = frozenset({"SPECDEBUG_NO_AGENT"})  # how the agent is reached, not what a verb does


def caller_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The settings that change what a verb does, as the caller has them (absent ones: empty)."""
    env = os.environ if env is None else env
    picked = {k: env.get(k, "") for k in ENV_KEYS}
    picked.update((k, v) for k, v in env.items() if k.startswith(ENV_PREFIXES) and k not in NOT_ENV)
    return dict(sorted(picked.items()))


def env_fingerprint(env: Mapping[str, str] | None = None) -> str:
    """A short hash of the settings that change what a verb does: the socket's name.  Two checksums
    (zlib: 2 ms to import where hashlib takes 10-15 ms on a loaded machine, on every verb); a
    collision costs nothing but a direct run, since the agent compares the values themselves."""
    import zlib

    data = repr(sorted(caller_env(env).items())).encode()
    return f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}"[:12]


def env_differences(mine: Mapping[str, str], theirs: Mapping[str, str]) -> list[str]:
    """The names (never the values) of the settings two environments disagree on."""
    return sorted(k for k in set(mine) | set(theirs) if mine.get(k, "") != theirs.get(k, ""))


def caller_identity() -> dict[str, str]:
    """What a caller says of its code (no file is read: the client stays one socket round trip):
    specdebug's version, where its package is, and the interpreter.  The agent compares these, and
    checks the stamp of the files there itself, beside the verb (`code_stamp`)."""
    import specdebug

    return {
        "version": str(getattr(specdebug, "__version__", "?")),
        "package": os.path.dirname(specdebug.__file__),
        "python": interpreter(),
    }


def interpreter() -> str:
    """The interpreter as an agent must match it: the program's real file and the environment it runs
    in (sys.prefix: a venv), and its version; not the name it was started by (the console script's
    `#!.venv/bin/python3` and `python -m specdebug` are one interpreter, and two agents replaced each
    other on every call when they alternated)."""
    return f"{os.path.realpath(sys.executable)} in {sys.prefix} {sys.version.split()[0]}"


def code_identity() -> dict[str, str]:
    """An agent's identity: the caller's (`caller_identity`) and a stamp of its source files
    (`code_stamp`): an upgrade or an edited checkout changes the stamp."""
    identity = caller_identity()
    return {**identity, "code": code_stamp(identity["package"])}


def code_stamp(package: str) -> str:
    """A stamp of the package's source files: path, size, mtime of every module (one stat a module;
    10-30 ms on a loaded machine, which is why the agent computes it, beside the verb)."""
    import hashlib

    seen: list[tuple[str, int, int]] = []
    pending = [package]
    while pending:
        try:
            entries = list(os.scandir(pending.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.name.endswith(".py"):
                    st = entry.stat(follow_symlinks=False)
                    seen.append((entry.path, st.st_size, st.st_mtime_ns))
                elif entry.name != "__pycache__" and entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
            except OSError:
                continue
    seen.sort()
    return hashlib.sha256(repr(seen).encode()).hexdigest()[:16]


def runtime_dir(create: bool = True) -> Path | None:
    """The user's private agent folder, or None when it is missing or not safe to use."""
    from pathlib import Path

    folder = runtime_folder(create)
    return Path(folder) if folder is not None else None


def runtime_folder(create: bool = True) -> str | None:
    """`runtime_dir` as a string (the client's path: no pathlib)."""
    folder = agent_folder_name()
    if create:
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass
        except OSError:
            return None
    return folder if is_private(folder) else None


def agent_folder() -> Path:
    """Where this user's agents live, usable or not."""
    from pathlib import Path

    return Path(agent_folder_name())


def agent_folder_name() -> str:
    base = os.environ.get("XDG_RUNTIME_DIR")
    return (
        os.path.join(base, "specdebug")
        if base and os.path.isabs(base)
        else f"/tmp/specdebug-agent-{os.getuid()}"
    )


def is_private(folder: Path | str) -> bool:
    """A real folder of this user that nobody else can enter or list."""
    return folder_problem(folder) is None


def folder_problem(folder: Path | str) -> str | None:
    """Why `folder` cannot hold an agent's socket (None: it can): missing, not a folder, a symlink,
    another user's, or open to others."""
    try:
        st = os.lstat(folder)
    except FileNotFoundError:
        return f"{folder} does not exist"
    except OSError as exc:
        return f"{folder}: {exc.strerror or exc}"
    if stat.S_ISLNK(st.st_mode):
        return f"{folder} is a symlink (a folder only this user owns is required)"
    if not stat.S_ISDIR(st.st_mode):
        return f"{folder} is not a folder"
    if st.st_uid != os.getuid():
        return f"{folder} belongs to {_user_name(st.st_uid)}, not to you"
    if st.st_mode & 0o077:
        return f"{folder} is open to others (mode {stat.S_IMODE(st.st_mode):04o}; 0700 is required)"
    return None


def _user_name(uid: int) -> str:
    try:
        import pwd

        return f"user {pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (KeyError, ImportError):
        return f"uid {uid}"


MAX_SOCKET_PATH = 100  # a Unix socket's path must fit sun_path (108 bytes on Linux, 104 elsewhere)


def socket_path(folder: Path, fingerprint: str | None = None) -> Path | None:
    """The socket for this environment in `folder`; None when its path is too long for a socket
    (a deep $XDG_RUNTIME_DIR): then no agent is used."""
    path = socket_name(str(folder), fingerprint)
    return folder / os.path.basename(path) if path is not None else None


def socket_name(folder: str, fingerprint: str | None = None) -> str | None:
    """`socket_path` as a string (the client's path: no pathlib)."""
    path = os.path.join(folder, f"agent-{fingerprint or env_fingerprint()}.sock")
    return path if len(path.encode()) <= MAX_SOCKET_PATH else None


def pid_path(sock: Path) -> Path:
    return sock.with_suffix(".pid")


def pid_name(sock: str) -> str:
    """`pid_path` as a string."""
    return os.path.splitext(sock)[0] + ".pid"
