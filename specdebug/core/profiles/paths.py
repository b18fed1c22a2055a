"""Paths on the box as a profile (or a HOST:PATH argument) names them: one expansion for every verb.

Why one function: a `log_file = "~/logs/x.log"` was expanded by launch (in its shell script), env, grep
and scan, but not by bench, which then read no log (a false "server not ready" warning and
`verify_ms: null`).  `~` and `~/...` mean the box user's $HOME, asked of the box once per call; any
other path is used as written.  launch.sh applies the same rule on the box when it creates the log,
and a command run in the login home takes `login_relative` (env's single probe).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specdebug.core.profiles.model import Profile
    from specdebug.remote.api import Remote


def needs_home(path: str) -> bool:
    return path == "~" or path.startswith("~/")


def login_relative(path: str) -> str:
    """The same path for a command that runs in the login home (no round trip for $HOME): `~/x` -> `x`,
    `~` -> `.` (env's one-probe read of the log uses this)."""
    if path == "~":
        return "."
    return path[2:] if path.startswith("~/") else path


async def box_path(remote: Remote, path: str) -> str:
    """`path` with a leading `~` / `~/` replaced by the box user's home (unchanged when it has none
    or the home cannot be read)."""
    if not needs_home(path):
        return path
    res = await remote.run(["sh", "-c", 'printf "%s" "$HOME"'])
    home = res.out.strip() if res.ok else ""
    if not home:
        return path
    return home if path == "~" else home.rstrip("/") + path[1:]


async def log_path(remote: Remote, profile: Profile) -> str:
    """The profile's log_file as a plain path on the box."""
    return await box_path(remote, profile.server.log_file)
