"""install-box's rc-file block (specdebug/sim/box/install.py): at the top, once, and removable.

A block below Debian's `case $- in *i*) ;; *) return;; esac` is never read by `ssh box CMD`; a second
install must not add a second block; --remove must give the user's file back as it was."""

from __future__ import annotations

from pathlib import Path

from specdebug.sim.box.install import BLOCK_BEGIN, rc_file, user_ports, with_block, without_block

DEBIAN = "# ~/.bashrc\ncase $- in\n    *i*) ;;\n      *) return;;\nesac\nalias ll='ls -l'\n"


def test_block_goes_first_once_and_comes_out_exactly() -> None:
    env = Path("/home/u/.specdebug/simbox/env.sh")
    once = with_block(DEBIAN, env)
    assert once.index(BLOCK_BEGIN) < once.index("return") and str(env) in once
    assert with_block(once, env) == once
    assert without_block(once) == DEBIAN
    assert without_block(DEBIAN) == DEBIAN


def test_rc_file_by_login_shell_and_ports_by_uid() -> None:
    home = Path("/home/u")
    assert rc_file(home, "/bin/bash") == home / ".bashrc"
    assert rc_file(home, "/usr/bin/zsh") == home / ".zshenv"
    assert rc_file(home, "/bin/sh") is None  # dash reads no file for a non-interactive command
    low, high = user_ports(1001)
    assert high - low == 100 and 10000 <= low and high <= 20000 and user_ports(1002) != (low, high)


def test_a_checkout_is_staged_without_caches_or_unreadable_files(tmp_path: Path) -> None:
    from specdebug.sim.box.install import stage_checkout

    src = tmp_path / "src"
    for rel in (
        "pyproject.toml",
        "setup.py",
        "specdebug/__init__.py",
        "examples/a.toml",
        "layouts/x.tcss",
        "scripts/specdebug",
    ):
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text("x")
    secret = src / ".hypothesis" / "constants"
    secret.mkdir(parents=True)
    (secret / "c").write_text("x")
    (src / "specdebug" / "__pycache__").mkdir()
    stage_checkout(src, tmp_path / "dst")
    staged = sorted(
        str(p.relative_to(tmp_path / "dst")) for p in (tmp_path / "dst").rglob("*") if p.is_file()
    )
    assert staged == [
        "examples/a.toml",
        "layouts/x.tcss",
        "pyproject.toml",
        "scripts/specdebug",
        "setup.py",
        "specdebug/__init__.py",
    ]
