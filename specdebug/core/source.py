"""Which source a server runs: its working directory and, when that is a git worktree, the
commit it holds (read on the box at launch).

Two worktrees of one repository with the same flags are two experiments (issue 23): the
fingerprint counts the cwd (core/fingerprint.py), and the launch records this beside it, so a
result says which commit it measured and a commit bisection cannot silently reuse another's.
Read with git on the box through an argv list (the cwd is a positional parameter, never shell
text); no git, or no repository there, is said as such, not guessed.
"""

from __future__ import annotations

import re

from specdebug.core.model import Model
from specdebug.remote.api import Remote, RemoteError

# `~` and `~/x` as the launch script reads them (the box user's home); the cwd is "$1"
_SCRIPT = r"""d=$1
case $d in "~") d=$HOME ;; "~/"*) d=$HOME/${d#"~/"} ;; esac
cd -- "$d" 2>/dev/null || { echo "state=nocwd"; exit 0; }
command -v git >/dev/null 2>&1 || { echo "state=nogit"; exit 0; }
top=$(git rev-parse --show-toplevel 2>/dev/null) || { echo "state=norepo"; exit 0; }
echo "state=git"
echo "top=$top"
echo "commit=$(git rev-parse HEAD 2>/dev/null)"
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null | head -c 1)" ]; then echo dirty=1; else echo dirty=0; fi
"""
_COMMIT_RE = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
_STATES = {
    "nocwd": "the working directory does not exist on the box",
    "nogit": "git is not installed on the box",
    "norepo": "not a git worktree",
}


class ServerSource(Model):
    """What a server runs from.  `commit` only when the cwd is a git worktree; `note` says why not."""

    cwd: str
    worktree: str | None = None  # the worktree's top folder on the box
    commit: str | None = None
    dirty: bool | None = None  # tracked files changed since `commit`
    note: str | None = None

    def describe(self) -> str:
        if self.commit is None:
            return f"{self.cwd} ({self.note or 'commit unknown'})"
        return f"{self.cwd} @ {self.commit[:12]}" + (" + uncommitted changes" if self.dirty else "")


async def read_source(remote: Remote, cwd: str | None) -> ServerSource | None:
    """The source of a server started in `cwd` (None: no cwd, the server runs from the box's home)."""
    if not cwd:
        return None
    try:
        res = await remote.run(["sh", "-c", _SCRIPT, "sh", cwd], timeout=15)
    except RemoteError as exc:
        return ServerSource(cwd=cwd, note=f"cannot tell: {exc}")
    facts = dict(line.partition("=")[::2] for line in res.out.splitlines()[:8] if "=" in line)
    state = facts.get("state")
    if not res.ok or state is None:
        return ServerSource(cwd=cwd, note=f"cannot tell: git check exited {res.exit_status}")
    if state != "git":
        return ServerSource(cwd=cwd, note=_STATES.get(state, "cannot tell"))
    top = facts.get("top", "")[:4096] or None
    commit = facts.get("commit", "")
    if not _COMMIT_RE.match(commit):  # a repository without a commit yet
        return ServerSource(cwd=cwd, worktree=top, note="no commit yet")
    return ServerSource(cwd=cwd, worktree=top, commit=commit, dirty=facts.get("dirty") == "1")
