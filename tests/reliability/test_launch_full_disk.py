"""Nothing is started without a record: `launch` on a box whose state folder is full (issue 40).

The old launch started the server, then failed to write its record ("No space left on device",
exit 1) and left the server running where `status` and `stop` could not find it.  Now a record as
large as the real one is written and removed first: a full disk refuses the launch before anything
starts.  Where the record still cannot be written after the start (the disk filled in between),
the server just started is stopped and the error says so.

The full disk is a 64 KiB tmpfs of the test's own (root only; skipped elsewhere), filled up.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from specdebug.core.control import launch as launch_mod
from specdebug.core.control.records import StateFileError, load_record
from specdebug.core.profiles import Profile
from tests.security.boxkit import run, write_profile
from tests.sshd_harness import free_port


def ours(marker: str) -> list[int]:
    """PIDs whose command line holds this test's own random marker."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    found.append(int(entry))
            except OSError:
                pass
    return found


def kill_ours(marker: str) -> None:
    for pid in ours(marker):
        try:
            os.killpg(os.getpgid(pid), signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def sleeper(marker: str) -> list[str]:
    return ["sh", "-c", "exec sleep 300", marker]


@pytest.fixture
def full_disk(tmp_path: Path):
    mnt = tmp_path / "full"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", str(mnt)]).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        (mnt / "servers").mkdir(mode=0o700)
        fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            while os.write(fd, b"\0" * 4096):
                pass
        except OSError:  # ENOSPC: full
            pass
        finally:
            os.close(fd)
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_full_disk_refuses_the_launch_before_anything_starts(sshd, tmp_path: Path, full_disk: Path) -> None:
    marker = f"fulldisk-{uuid.uuid4().hex}"
    profile = write_profile(
        tmp_path / "p.toml",
        "fulldisk",
        {
            "argv": sleeper(marker),
            "log_file": str(tmp_path / "server.log"),
            "port": free_port(),
            "kind": "custom",
        },
    )
    try:
        t0 = time.monotonic()
        res = run(
            sshd,
            "launch",
            "gpubox",
            "-c",
            str(profile),
            timeout=120,
            env={"SPECDEBUG_STATE_DIR": str(full_disk / "servers")},
        )
        err = res.stderr.decode()
        print(
            f"launch on a full disk: exit {res.returncode} after {time.monotonic() - t0:.1f} s: {err.strip()}"
        )
        assert res.returncode == 1, err
        assert "record cannot be written" in err and "nothing was started" in err, err
        assert "No space left on device" in err, err
        assert ours(marker) == [], "a server was started without a record"
        assert [p.name for p in (full_disk / "servers").iterdir()] == [], "a partial file was left"
    finally:
        kill_ours(marker)


async def test_a_record_that_fails_after_the_start_stops_the_server(
    remote, tmp_path: Path, monkeypatch
) -> None:
    marker = f"unrecorded-{uuid.uuid4().hex}"
    name = f"unrec-{uuid.uuid4().hex[:6]}"
    profile = Profile.model_validate(
        {
            "name": name,
            "server": {
                "argv": sleeper(marker),
                "log_file": str(tmp_path / "s.log"),
                "port": free_port(),
                "kind": "custom",
            },
        }
    )
    real_save = launch_mod.save_record

    async def disk_fills_after_the_check(remote, record, *, check_only: bool = False) -> None:
        if check_only:
            return await real_save(remote, record, check_only=True)
        raise StateFileError("cannot write the server state file: [Errno 28] No space left on device")

    monkeypatch.setattr(launch_mod, "save_record", disk_fills_after_the_check)
    try:
        with pytest.raises(launch_mod.UnrecordedServer) as caught:
            await launch_mod.start_launch(remote, profile)
        text = str(caught.value)
        print(text)
        assert "but its server record cannot be written on the box" in text and ": stopped it (" in text, text
        pid = int(re.search(r"PID (\d+)", text).group(1))
        assert not Path(f"/proc/{pid}").exists() or ours(marker) == [], "the unrecorded server still runs"
        left = await load_record(remote, name)  # stop's own "stopped" record, where the disk takes it
        assert left is None or left.stopped_at is not None
    finally:
        kill_ours(marker)
