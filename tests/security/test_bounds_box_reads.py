"""Whatever the box prints, the client stays bounded and keeps working (issue 22).

Over a real sshd whose sessions find our own `python3` and `nvidia-smi` first on PATH:
- a python3 wrapper that prints a banner before and after: status/stop still work, the banner is
  skipped and said as a warning (the protocol is framed);
- a python3 that hangs: the connection goes on without the helper, says why, and the process it
  started is ended (OpenSSH leaves a no-pty command running);
- 100 MB and garbage from nvidia-smi: bounded, and no phantom GPUs;
- a 300 MB line on a stream: cut at the bound, the next line still arrives.
"""

from __future__ import annotations

import resource
import shlex
import sys
import uuid
from pathlib import Path

import pytest

from specdebug.core.hosts import query_gpus
from specdebug.remote.api import RemoteError
from specdebug.remote.client import BoxClient
from tests.boxes import ssh_box
from tests.security.boxkit import run, unique, write_profile
from tests.sshd_harness import start_sshd

pytestmark = pytest.mark.slow

REAL_PY = sys.executable


def _box(tmp_path: Path, scripts: dict[str, str], login_echo: str = "", login_delay: str = ""):
    """An sshd whose sessions see `scripts` (name -> sh body) first on PATH (set after the login
    shell's own start-up files, by a ForceCommand), and print `login_echo` first as a ~/.bashrc
    echo would; `login_delay` is sh run first (a session slow to start, as on a loaded box)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text("#!/bin/sh\n" + body + "\n")
        path.chmod(0o755)
    wrap = tmp_path / "login.sh"
    echo = f"echo {shlex.quote(login_echo)}\n" if login_echo else ""
    wrap.write_text(
        f'#!/bin/sh\n{login_delay}\n{echo}PATH={bin_dir}:$PATH; export PATH\nexec /bin/sh -c "$SSH_ORIGINAL_COMMAND"\n'
    )
    wrap.chmod(0o755)
    return start_sshd(tmp_path / "sshd", extra_config=(f"ForceCommand {wrap}",))


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _tagged(tag: str) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if tag.encode() in (d / "cmdline").read_bytes():
                    out.append(int(d.name))
            except OSError:
                continue
    return out


async def _connect(box, **kw) -> BoxClient:
    r = ssh_box(box.alias, ssh_config=box.config_path, connect_timeout=5.0, **kw)
    await r.start()
    await r.wait_connected(30)
    return r


@pytest.mark.parametrize("where", ["python3 wrapper", "login script"])
async def test_a_banner_around_the_protocol_is_skipped_and_said(tmp_path: Path, where: str) -> None:
    if where == "python3 wrapper":
        box = _box(
            tmp_path, {"python3": f'echo "MOTD: welcome to the cluster"\n"{REAL_PY}" "$@"\necho "bye"'}
        )
    else:
        box = _box(tmp_path, {}, login_echo="MOTD: sourced ~/.bashrc")
    try:
        for helper in (True, False):  # the resident helper, and the one-shot ops
            r = await _connect(box, use_helper=helper)
            try:
                if helper:
                    assert r.helper_info is not None, r.warnings
                holder = await r.box_op("port_holder", {"port": 1}, timeout=30)
                assert holder.get("listening") is False
                assert any("outside specdebug's protocol" in w and "MOTD" in w for w in r.warnings), (
                    r.warnings
                )
            finally:
                await r.close()
        name = unique("banner")
        prof = write_profile(tmp_path / "p.toml", name, {"argv": ["sleep", "1"], "port": 1})
        for verb in ("status", "stop"):
            res = run(box, verb, "gpubox", "-c", str(prof))
            assert res.returncode in (0, 1) and b"Traceback" not in res.stderr, res.stderr
            assert b"answered" not in res.stdout + res.stderr, res.stderr
            assert b"outside specdebug's protocol" in res.stderr, res.stderr
    finally:
        box.stop()


async def _hung_op_is_ended(tmp_path: Path, *, use_helper: bool, slow_sessions: bool) -> None:
    """A box whose python3 hangs (sleeps): the helper's start and a one-shot op past its timeout
    both end what they started, and say so only when it is true.  `slow_sessions`: sessions after
    the connect start 9 s late (a loaded box), past the op's timeout before the PID is told."""
    tag = f"3{uuid.uuid4().int % 10**6}.5"
    slow = tmp_path / "slow"
    box = _box(tmp_path, {"python3": f"exec sleep {tag}"}, login_delay=f'[ -e "{slow}" ] && sleep 9')
    try:
        r = await _connect(box, use_helper=use_helper)
        try:
            if use_helper:
                assert r.helper_info is None
                said = [w for w in r.warnings if "did not answer within" in w]
                assert said and "ended it" in said[0], r.warnings
                assert _tagged(f"sleep\0{tag}") == []  # nothing left behind
            if slow_sessions:
                slow.touch()
            with pytest.raises(RemoteError, match=r"did not answer within 2 s \(ended it \(PID \d+\)\)"):
                await r.box_op("port_holder", {"port": 1}, timeout=2)
            assert _tagged(f"sleep\0{tag}") == []
        finally:
            await r.close()
    finally:
        box.stop()


async def test_a_hung_python3_is_ended_and_said(tmp_path: Path) -> None:
    await _hung_op_is_ended(tmp_path, use_helper=True, slow_sessions=False)


async def test_a_request_whose_session_starts_late_is_still_ended(tmp_path: Path) -> None:
    """A loaded box starts a session seconds after the channel opens: the request's timeout passes
    before the command has told its PID.  It is still ended, and "ended it" is said only then."""
    await _hung_op_is_ended(tmp_path, use_helper=False, slow_sessions=True)


async def test_nvidia_smi_flood_and_garbage_are_bounded(tmp_path: Path) -> None:
    flood = "head -c 100000000 /dev/zero | tr '\\0' 'x'"
    garbage = 'i=0; while [ $i -lt 5226 ]; do echo "$i garbage, line"; i=$((i+1)); done'
    box = _box(tmp_path, {"nvidia-smi": f'if [ -e "{tmp_path}/flood" ]; then {flood}; else {garbage}; fi'})
    try:
        for helper in (True, False):
            r = await _connect(box, use_helper=helper)
            try:
                gpus, why = await query_gpus(r)
                assert gpus == [] and "not a GPU listing" in why or "were not GPU rows" in why, why
                (tmp_path / "flood").touch()
                before = _rss_mib()
                gpus, why = await query_gpus(r)
                assert gpus == [] and "more than specdebug reads" in why, why
                assert _rss_mib() - before < 400
                (tmp_path / "flood").unlink()
            finally:
                await r.close()
    finally:
        box.stop()


async def test_a_300_mb_stream_line_is_cut(sshd) -> None:
    r = await _connect(sshd)
    try:
        before = _rss_mib()
        lines = []
        async for line in r.stream(
            ["sh", "-c", "head -c 300000000 /dev/zero | tr '\\0' 'y'; echo; echo after"]
        ):
            lines.append(len(line) if len(line) > 100 else line)
        assert lines == [1 << 20, "after"]
        assert _rss_mib() - before < 300
    finally:
        await r.close()
