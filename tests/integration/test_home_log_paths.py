"""A `~/...` log_file reads the same in every verb (issue 21 section 3): launch, env, bench, scan, grep, stop.

bench used to skip the expansion: a false "server not ready" warning and `verify_ms: null` where the
same profile with an absolute path gave verify 16 ms.  The box is a private sshd whose sessions get
HOME set to a test folder (SetEnv comes first: sshd keeps the first value), so `~` never touches the
real home.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests import clifork
from tests.sshd_harness import FIXTURES, free_port, start_sshd

pytestmark = pytest.mark.slow
NCCL = {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "NCCL_P2P_LEVEL": "SYS"}


def specdebug(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return clifork.run(
        [sys.executable, "-m", "specdebug.cli", *args], capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def home_box(tmp_path_factory):
    home = tmp_path_factory.mktemp("boxhome")
    path = ":".join([str(FIXTURES / "bin"), os.path.dirname(sys.executable), "/usr/local/bin:/usr/bin:/bin"])
    server = start_sshd(
        tmp_path_factory.mktemp("sshd-home"),
        extra_config=(f"SetEnv HOME={home} PATH={path} SPECDEBUG_TEST_SSHD=1",),
    )
    yield server, home
    server.stop()


def test_tilde_log_file_in_every_verb(home_box, tmp_path: Path) -> None:
    sshd, home = home_box
    cfg = str(sshd.config_path)
    name = f"tilde-{uuid.uuid4().hex[:6]}"
    port = free_port()
    simlog = tmp_path / f"{name}.sim.log"
    argv = [sys.executable, "-m", "specdebug.sim", "--tp", "2", "--port", str(port), "--speculative-algorithm",
            "EAGLE3", "--speculative-num-steps", "2", "--speculative-eagle-topk", "1",
            "--speculative-num-draft-tokens", "3", "--decode-log-interval", "10", "--profile-verify",
            "--time-scale", "0.02", "--log-file", str(simlog)]  # fmt: skip
    prof = tmp_path / f"{name}.toml"
    prof.write_text(
        f'name = {json.dumps(name)}\n[server]\nargv = {json.dumps(argv)}\nkind = "sglang"\n'
        f'log_file = "~/logs/{name}.log"\nport = {port}\n'
        f"env = {{{', '.join(f'{k} = {json.dumps(v)}' for k, v in NCCL.items())}}}\n"
        '[ready]\ntimeout_s = 90\n[workers]\nmatch = "sglang::scheduler"\n'
        '[patterns]\nverify_ms = "Target verify: (?P<value>[0-9.]+) ms"\n'
        "[bench]\nrequests = 2\nconcurrency = 1\ninput_len = 64\noutput_len = 96\n"
    )
    real_log = home / "logs" / f"{name}.log"
    try:
        r = specdebug("launch", "-F", cfg, "gpubox", "-c", str(prof), "--wait", "--json")
        assert r.returncode == 0, r.stdout + r.stderr
        assert real_log.is_file() and "server_args=" in real_log.read_text()

        r = specdebug("env", "-F", cfg, "gpubox", "-c", str(prof), "--json")
        assert r.returncode == 0, r.stderr
        env = json.loads(r.stdout)
        assert not any("cannot read log" in str(p) for p in env.get("problems", [])), env.get("problems")

        r = specdebug(
            "bench", "-F", cfg, "gpubox", "-c", str(prof), "--session", str(tmp_path / "s"), "--json"
        )
        assert r.returncode == 0, r.stdout + r.stderr
        res = json.loads(r.stdout)
        assert not any("not ready" in w for w in res["warnings"]), res["warnings"]
        assert res["server"]["verify_ms"] == pytest.approx(16.0, rel=0.25), res["server"]
        assert res["server"]["accept_len"] is not None

        r = specdebug("scan", "-F", cfg, f"gpubox:~/logs/{name}.log", "--last-run", "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["metrics"]["accept_len"]["n"] >= 1

        r = specdebug("grep", "-F", cfg, f"gpubox:~/logs/{name}.log", "-e", "fired up and ready")
        assert r.returncode == 0 and "fired up and ready" in r.stdout, r.stderr
        # HOST -c PROFILE: the profile's log on that host, as every other verb reads HOST -c PROFILE
        r = specdebug("grep", "-F", cfg, "gpubox", "-c", str(prof), "-e", "fired up and ready")
        assert r.returncode == 0 and "fired up and ready" in r.stdout, r.stderr
    finally:
        r = specdebug("stop", "-F", cfg, "gpubox", "-c", str(prof), "--grace", "5")
        try:
            pid = json.loads(Path(f"{simlog}.sim.json").read_text())["pid"]
            if str(tmp_path).encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                os.killpg(pid, signal.SIGKILL)
        except (OSError, ValueError, KeyError):
            pass
