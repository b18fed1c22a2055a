"""Wrapping a box command as argv: extra env, a working folder, the stdin-EOF watchdog.

Every remote command is an argv list, and stays one here: user text (patterns, env names, paths)
is only ever a word of it, never pasted into shell syntax (the scripts get it as positional
parameters).  Where a transport needs shell text (SSH), it quotes in one place
(specdebug.transport.ssh.quote).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

# what a POSIX environment variable name may be: the one rule for profiles, --var and `env K=V`
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def is_env_name(name: str) -> bool:
    """True for a name `env NAME=value` and /proc/PID/environ can carry unambiguously."""
    return ENV_NAME_RE.match(name) is not None


def env_assignments(env: Mapping[str, str] | None) -> list[str]:
    """`K=V` words for `env K=V cmd`: sshd drops SSH `env` requests unless AcceptEnv matches."""
    words = []
    for name, value in (env or {}).items():
        if not is_env_name(name):
            raise ValueError(f"invalid environment variable name: {name!r}")
        words.append(f"{name}={value}")
    return words


# `~` and `~/x` mean the box user's home (quoted words are never tilde-expanded by the shell)
_CD_AND_EXEC = (
    'case "$1" in "~") cd ;; "~/"*) cd "$HOME/${1#"~/"}" ;; *) cd "$1" ;; esac && shift && exec "$@"'
)


def with_env_cwd(
    argv: Sequence[str], env: Mapping[str, str] | None = None, cwd: str | None = None
) -> list[str]:
    """Wrap argv so it runs with extra env in cwd, still as a pure argv list."""
    argv = list(argv)
    if env:
        argv = ["env", *env_assignments(env), *argv]
    if cwd:
        # cd needs a shell; the directory and the command stay positional parameters
        argv = ["sh", "-c", _CD_AND_EXEC, "sh", cwd, *argv]
    return argv


# Runs "$@" so that the remote command ends when our channel closes: OpenSSH keeps a no-pty
# command running after close (and ignores signals for root logins before 10.0), so a watchdog
# waits for stdin EOF and kills the session's process group.  The command's own exit status is
# passed through when it ends first.
_WATCHDOG = (
    # background jobs of a non-interactive sh get stdin from /dev/null, so keep the channel's
    # stdin on fd 3 for the watchdog's cat
    "exec 3<&0; "
    "{ cat <&3 >/dev/null 2>&1; kill -TERM 0; } >/dev/null 2>&1 & "
    '"$@" </dev/null 3<&- & c=$!; exec 3<&-; wait "$c"; exit $?'
)
_WATCHDOG_MERGED = "exec 2>&1; " + _WATCHDOG


def watchdog_argv(argv: Sequence[str], *, merge_stderr: bool = False) -> list[str]:
    """argv for a long-running stream: argv under the stdin-EOF watchdog."""
    script = _WATCHDOG_MERGED if merge_stderr else _WATCHDOG
    return ["sh", "-c", script, "sh", *argv]
