"""`specdebug drift` and the drift recorded with each result, on the sim over the real loopback sshd.

The box's server interpreter gets a throwaway site dir on PYTHONPATH holding a wheel-like install of
a package named sglang (dist-info with a RECORD); the sim's nvidia-smi is first on the server's PATH.
Between two benchmark results the test patches sglang/srt/managers/scheduler.py, writes a
sitecustomize.py and lowers GPU 3's power limit (`nvidia-smi -i 3 -pl 450`): each shows in `drift`,
in `history --compare 1 2` and in the report.  Nothing of the real installed specdebug is touched.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from specdebug.sim.box import local as sim_local
from specdebug.sim.box.nvidia_smi import write_shim
from tests import clifork

SCHEDULER = "sglang/srt/managers/scheduler.py"
FILES = {
    "sglang/__init__.py": "__version__ = '0.4.6'\n",
    SCHEDULER: "def event_loop_overlap():\n    pass\n",
}


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def fake_install(site: Path) -> None:
    """A wheel-like install: the files and a dist-info whose RECORD holds their sha256 and size."""
    rows = []
    for rel, text in FILES.items():
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        rows.append(f"{rel},{_record_hash(text.encode())},{len(text.encode())}")
    info = site / "sglang-0.4.6.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 0.4.6\n\n")
    rows.append("sglang-0.4.6.dist-info/RECORD,,")
    (info / "RECORD").write_text("\n".join(rows) + "\n")


def specdebug(*args: str) -> subprocess.CompletedProcess:
    return clifork.run(
        [sys.executable, "-m", "specdebug.cli", *args], capture_output=True, text=True, timeout=90
    )


def test_patch_sitecustomize_and_power_limit_show_in_drift_and_compare(sshd, tmp_path: Path) -> None:
    site, gpu_dir, bin_dir = tmp_path / "site", tmp_path / "gpus", tmp_path / "bin"
    site.mkdir(), gpu_dir.mkdir()
    fake_install(site)
    shim = write_shim(bin_dir)
    env = {
        "PYTHONPATH": str(site),
        "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin",
        "SPECDEBUG_SIM_GPU_DIR": str(gpu_dir),
    }
    log = tmp_path / "server.log"
    sim = sim_local.start_local_sim(
        ["--model-path", "m", "--tp", "2", "--decode-log-interval", "5"], log_file=log, extra_env=env
    )
    with sim:
        sim.wait_ready(60)
        argv = [
            sys.executable,
            "-m",
            "specdebug.sim",
            "--model-path",
            "m",
            "--tp",
            "2",
            "--port",
            str(sim.port),
        ]
        profile = tmp_path / "p.toml"
        profile.write_text(
            f'name = "drifty"\n[server]\nargv = {json.dumps(argv)}\nlog_file = {json.dumps(str(log))}\n'
            f"port = {sim.port}\nenv = {{{', '.join(f'{k} = {json.dumps(v)}' for k, v in env.items())}}}\n"
        )
        session = str(tmp_path / "session")
        ssh = ["-F", str(sshd.config_path), "gpubox", "-c", str(profile)]
        bench = ["bench", *ssh, "--session", session, "--requests", "1", "--output-len", "16", "--json"]

        first = specdebug(*bench)
        assert first.returncode == 0, first.stderr
        before = json.loads(specdebug("drift", *ssh, "--json").stdout)
        assert before["packages"]["sglang"] == "0.4.6" and before["modified"] == []
        assert before["gpus"][3]["power.limit"] == "700.00"
        assert not [c for c in before["startup_code"] if c["path"].startswith(str(site))]

        (site / SCHEDULER).write_text(FILES[SCHEDULER] + "    import time; time.sleep(0)  # local patch\n")
        (site / "sitecustomize.py").write_text("import os\nos.environ.setdefault('NCCL_PROTO', 'LL')\n")
        smi = subprocess.run(
            [str(shim), "-i", "3", "-pl", "450"], env={**os.environ, **env}, capture_output=True, text=True
        )
        assert smi.returncode == 0 and "450.00 W from 700.00 W" in smi.stdout

        now = specdebug("drift", *ssh, "--json")
        assert now.returncode == 0, now.stderr
        after = json.loads(now.stdout)
        assert {(m["package"], m["file"]) for m in after["modified"]} == {("sglang", SCHEDULER)}
        assert str(site / "sitecustomize.py") in {c["path"] for c in after["startup_code"]}
        assert after["gpus"][3]["power.limit"] == "450.00" and after["gpus"][2]["power.limit"] == "700.00"
        human = specdebug("drift", *ssh)
        assert f"modified {SCHEDULER}" in human.stdout and "power limit 450.00 W" in human.stdout

        second = specdebug(*bench)
        assert second.returncode == 0, second.stderr
        moved = [
            w for w in json.loads(second.stdout)["warnings"] if w.startswith("box changed since result #1")
        ]
        assert moved and "GPU 3 power limit 700 -> 450 W" in moved[0], json.loads(second.stdout)["warnings"]

    cmp = specdebug("history", "--session", session, "--compare", "1", "2", "--json")
    assert cmp.returncode == 0, cmp.stderr
    drift = json.loads(cmp.stdout)["drift"]
    assert any(line.startswith(f"{SCHEDULER} modified (sglang") for line in drift), drift
    assert any(line.startswith(f"{site / 'sitecustomize.py'} added (sitecustomize") for line in drift), drift
    assert "GPU 3 power limit 700 -> 450 W" in drift
    assert not any("GPU 2" in line for line in drift)
    report = specdebug("report", "--session", session)
    assert "## What changed on the box between runs" in report.stdout
    assert "between #1 " in report.stdout and "GPU 3 power limit 700 -> 450 W" in report.stdout
