"""`specdebug pair` usage errors: one clear line and exit 2, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.pair_harness import pair_cli


@pytest.mark.parametrize(
    "args, message",
    [
        ((), "give HOST"),
        (("gpubox", "--name", "a b"), "session name 'a b'"),
        (
            ("gpubox", "--allow-ro", "no_such_user_sdpair"),
            "no such user on this machine: 'no_such_user_sdpair'",
        ),
        (("gpubox", "--allow", "nobody", "--allow-ro", "nobody"), "both --allow and --allow-ro"),
        (("gpubox", "-c", "/nonexistent/p.toml"), "no such file"),
        (("--join", "nope"), "no pairing session named 'nope'"),
    ],
)
def test_usage_errors_exit_2(args, message, tmp_path: Path) -> None:
    res = pair_cli(tmp_path, *args)
    assert res.returncode == 2, res.stderr
    assert message in res.stderr
    assert "Traceback" not in res.stderr
    assert list(tmp_path.iterdir()) == []  # nothing started, no folder left


def test_own_user_is_not_a_seat(tmp_path: Path) -> None:
    import getpass

    res = pair_cli(tmp_path, "gpubox", "--allow-ro", getpass.getuser())
    assert res.returncode == 2 and "always has full access" in res.stderr


def test_list_json_when_there_is_nothing(tmp_path: Path) -> None:
    res = pair_cli(tmp_path, "--list", "--json")
    assert res.returncode == 0
    assert json.loads(res.stdout) == {"sessions": [], "refused": []}
