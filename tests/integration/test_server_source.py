"""A server's identity includes its source (issue 23 §3): the commit its cwd holds when that is a
git worktree, read on the box (the real sshd) at launch and kept in the server record."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from specdebug.core.control import actions as server_control
from specdebug.core.control.launch import launch
from specdebug.core.journal import Journal
from specdebug.core.profiles import Profile
from specdebug.core.records import LaunchRecord
from specdebug.core.source import read_source
from tests.sshd_harness import free_port

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")


def git(repo: Path, *args: str) -> str:
    env_args = ["-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]
    return subprocess.run(
        ["git", *env_args, "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def worktree(path: Path) -> tuple[Path, str]:
    path.mkdir(parents=True)
    git(path, "init", "-q")
    (path / "server.py").write_text("print('v1')\n")
    git(path, "add", "server.py")
    git(path, "commit", "-q", "-m", "v1")
    return path, git(path, "rev-parse", "HEAD")


async def test_the_source_is_the_worktree_commit_read_on_the_box(remote, tmp_path: Path) -> None:
    repo, head = worktree(tmp_path / "wt-a")
    (repo / "sub").mkdir()
    src = await read_source(remote, str(repo / "sub"))
    assert src is not None and src.commit == head and src.dirty is False
    assert src.worktree == str(repo) and head[:12] in src.describe()
    (repo / "server.py").write_text("print('v2')\n")  # a tracked file changed: said, not hidden
    src = await read_source(remote, str(repo))
    assert src is not None and src.commit == head and src.dirty is True
    assert "uncommitted" in src.describe()
    plain = tmp_path / "plain"
    plain.mkdir()
    src = await read_source(remote, str(plain))
    assert src is not None and src.commit is None and src.note == "not a git worktree"
    src = await read_source(remote, str(tmp_path / "missing dir; touch x"))
    assert src is not None and src.commit is None and "does not exist" in (src.note or "")
    assert not (Path.home() / "x").exists() and not Path("x").exists()
    assert await read_source(remote, None) is None


async def test_a_launch_records_which_commit_runs(remote, tmp_path: Path) -> None:
    repo, head = worktree(tmp_path / "wt-b")
    profile = Profile.model_validate(
        {
            "name": f"src-{tmp_path.name[-6:]}",
            "server": {
                "argv": ["sh", "-c", "while :; do sleep 0.2; done"],
                "cwd": str(repo),
                "log_file": str(tmp_path / "logs" / "src.log"),
                "port": free_port(),
                "kind": "custom",
            },
        }
    )
    journal = Journal(tmp_path / "session")
    record = await launch(remote, profile, journal=journal)
    try:
        assert record.source is not None and record.source.commit == head
        assert record.cwd == str(repo) and record.fingerprint == profile.fingerprint()
        (launched,) = Journal(tmp_path / "session").records({"launch"})  # read back through the model
        assert isinstance(launched, LaunchRecord) and launched.source == record.source
    finally:
        result = await server_control.stop(remote, profile, grace_s=0.5)
    assert result.stopped
