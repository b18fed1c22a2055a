"""What launch writes, stop and status must read back (issue 22).

10^5 env vars made a 1.7 MB server record that `stop` and `status` then refused, so specdebug
could not stop its own server.  Launch refuses such a profile before starting anything, saying
why; a profile under the bound launches, and status and stop accept its record.  Real sshd.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.security.boxkit import forget_server, run, state_dir, unique, write_profile

pytestmark = pytest.mark.slow


def _profile(tmp_path: Path, name: str, n_env: int) -> Path:
    env = {f"V{i}": "x" * 8 for i in range(n_env)}
    return write_profile(
        tmp_path / f"{name}.toml",
        name,
        {"argv": ["sleep", "120"], "port": 1, "log_file": str(tmp_path / f"{name}.log"), "env": env},
    )


def test_a_record_too_large_to_read_back_is_refused_up_front(sshd, tmp_path: Path) -> None:
    name = unique("bigenv")
    try:
        res = run(sshd, "launch", "gpubox", "-c", str(_profile(tmp_path, name, 100_000)))
        assert res.returncode != 0 and b"Traceback" not in res.stderr
        said = (res.stdout + res.stderr).decode()
        assert "its server record would be about" in said and "100001 env vars" in said, said
        assert "trim server.env" in said
        assert not (state_dir() / f"{name}.json").exists()  # nothing started, nothing recorded
        assert not (tmp_path / f"{name}.log").exists()
    finally:
        forget_server(name)


def test_what_launch_writes_status_and_stop_accept(sshd, tmp_path: Path) -> None:
    name = unique("manyenv")
    prof = _profile(tmp_path, name, 20_000)
    try:
        res = run(sshd, "launch", "gpubox", "-c", str(prof))
        assert res.returncode == 0, res.stderr
        assert (state_dir() / f"{name}.json").stat().st_size > 400_000
        st = run(sshd, "status", "gpubox", "-c", str(prof), "--json")
        assert json.loads(st.stdout)["state"] == "running", st.stderr
        stop = run(sshd, "stop", "gpubox", "-c", str(prof))
        assert stop.returncode == 0, stop.stderr
    finally:
        forget_server(name)
