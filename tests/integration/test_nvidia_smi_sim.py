"""The demo box's simulated nvidia-smi: the real CLI's formats, 8 GPUs that follow the sim's load,
and a thermal throttle on request, seen through the same probe a real box gets."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from specdebug.core.bench.gpu import gpu_warnings
from specdebug.core.hosts import NVIDIA_SMI_ARGV, gather_host_info, parse_nvidia_smi, query_gpus
from specdebug.sim.box import nvidia_smi
from specdebug.sim.box.loopback_sshd import LoopbackSSHServer
from tests.boxes import ssh_box
from tests.sshd_harness import free_port
from tests.tmux_harness import Tmux

NOW = 1_800_000_000.0
FIXTURE_CSV = Path(__file__).resolve().parents[1] / "fixtures" / "gpus.csv"


def fake(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "specdebug.sim.box.nvidia_smi", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def load(gpus, *, util=97.0, heat=0.5, mem=120000, throttle=None, pid=None) -> dict:
    return {
        "pid": pid or os.getpid(),
        "t": NOW,
        "gpus": gpus,
        "util": util,
        "heat": heat,
        "mem_mib": mem,
        "throttle": throttle,
    }


# ---- formats and the load model (pure) ------------------------------------------------------------
def test_query_csv_is_what_specdebug_parses_like_the_real_rows() -> None:
    fields = NVIDIA_SMI_ARGV[1].split("=", 1)[1].split(",")
    gpus = nvidia_smi.gpu_table([load([0, 1, 2, 3], throttle={"gpu": 2, "at": NOW - 1})], NOW)
    text = nvidia_smi.query_csv(gpus, fields, header=False, units=False)
    rows = parse_nvidia_smi(text)
    real = parse_nvidia_smi(FIXTURE_CSV.read_text())[0]
    assert len(rows) == 8
    for field in ("name", "memory_total_mib", "clocks_max_sm_mhz"):
        assert getattr(rows[0], field) == getattr(real, field)
    assert (
        rows[0].utilization_pct == 97 and rows[0].memory_used_mib > 100000 and rows[0].clocks_sm_mhz == 1980
    )
    assert rows[2].throttled and rows[2].throttle_reasons == ["sw_thermal_slowdown"]
    assert rows[2].temperature_c >= 85 and rows[2].clocks_sm_mhz < 1980
    assert rows[5].utilization_pct == 0 and rows[5].throttle_reasons == ["gpu_idle"] and not rows[5].throttled
    assert any("GPU 2 throttled" in w for w in gpu_warnings(rows, rows))
    # the same cell shapes as the captured rows: value count, hex width of the reasons
    assert len(text.splitlines()[0].split(", ")) == len(FIXTURE_CSV.read_text().splitlines()[0].split(", "))
    assert text.splitlines()[0].split(", ")[-1] == "0x0000000000000000"


def test_heat_and_throttle_follow_time() -> None:
    cool = nvidia_smi.gpu_table([load([0], heat=0.0, util=0.0, throttle={"gpu": 0, "at": NOW + 30})], NOW)[0]
    hot = nvidia_smi.gpu_table([load([0], heat=1.0)], NOW)[0]
    later = nvidia_smi.gpu_table(
        [load([0], heat=0.0, util=0.0, throttle={"gpu": 0, "at": NOW + 30})], NOW + 31
    )[0]
    assert cool.temp < hot.temp and cool.power < hot.power and cool.reasons == nvidia_smi.BIT_IDLE
    assert later.reasons & nvidia_smi.BIT_SW_THERMAL and later.temp >= 85


def test_writer_rises_under_load_and_settles() -> None:
    state = {"phase": "ready", "busy": True}
    w = nvidia_smi.LoadWriter("/nonexistent", [0], lambda: (state["phase"], state["busy"]), mem_fraction=0.88)
    for _ in range(20):
        w.step(0.5)
    busy = w.state()
    assert busy["util"] > 90 and 0.2 < busy["heat"] < 1 and busy["mem_mib"] > 0.85 * nvidia_smi.MEM_TOTAL_MIB
    state["busy"] = False
    for _ in range(10):
        w.step(0.5)
    assert w.state()["util"] < 1 and w.state()["heat"] < busy["heat"]


def test_cli_shapes(tmp_path: Path) -> None:
    env = {nvidia_smi.ENV_DIR: str(tmp_path)}
    r = fake("--query-gpu=index,memory.used,power.draw,clocks.sm", "--format=csv", env=env)
    assert r.returncode == 0
    lines = r.stdout.splitlines()
    assert lines[0] == "index, memory.used [MiB], power.draw [W], clocks.current.sm [MHz]"
    assert lines[1].endswith(" MHz") and " MiB, " in lines[1] and len(lines) == 9
    r = fake("-L", env=env)
    assert r.stdout.splitlines()[7].startswith("GPU 7: NVIDIA H200 (UUID: GPU-")
    r = fake(env=env)
    assert "NVIDIA-SMI" in r.stdout and "No running processes found" in r.stdout
    assert {len(x) for x in r.stdout.splitlines()[1:] if x} == {91}
    r = fake("--query-gpu=index,bogus.field", "--format=csv", env=env)
    assert r.returncode == 2 and 'Field "bogus.field" is not a valid field to query.' in r.stdout
    r = fake("--query-gpu=index", "--format=csv,noheader", "-i", "3", env=env)
    assert r.stdout == "3\n"


def test_files_of_dead_sims_are_ignored_and_removed(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    (tmp_path / f"sim-{dead.pid}.json").write_text(
        json.dumps(load(list(range(8)), pid=dead.pid) | {"t": time.time()})
    )
    (tmp_path / "sim-1.json").write_text(json.dumps(load([0], pid=1) | {"t": time.time() - 60}))  # stale
    assert nvidia_smi.read_loads(str(tmp_path), time.time()) == []
    assert list(tmp_path.iterdir()) == []


# ---- through the demo box: the probe of a real box, a sim that loads the GPUs ----------------------------
@pytest.fixture
def demo_box():
    server = LoopbackSSHServer(alias="simbox")
    server.start()
    yield server
    server.stop()
    shutil.rmtree(server.dir, ignore_errors=True)


async def test_demo_box_gpus_follow_the_sim(demo_box, tmp_path: Path) -> None:
    remote = ssh_box("simbox", ssh_config=demo_box.config_path)
    await remote.wait_connected(20)
    try:
        info = await gather_host_info(remote)
        assert info.gpu_error is None and len(info.gpus) == 8
        assert all(g.utilization_pct == 0 and g.memory_used_mib < 10 for g in info.gpus)  # nothing runs yet

        port = free_port()
        argv = [
            sys.executable,
            "-m",
            "specdebug.sim",
            "--tp",
            "4",
            "--port",
            str(port),
            "--time-scale",
            "0.01",
            "--throttle-gpu",
            "2",
            "--throttle-after",
            "1",
        ]
        async with remote.stream(argv, stderr=True, cwd=str(tmp_path)) as sim:
            lines: list[str] = []

            async def read() -> None:
                async for line in sim:
                    lines.append(line)

            reader = asyncio.create_task(read())
            deadline = time.monotonic() + 60
            while not any("ready to roll" in x for x in lines):
                assert time.monotonic() < deadline, "".join(lines[-20:])
                await asyncio.sleep(0.2)
            gpus, err = await query_gpus(remote)
            assert err is None
            used = [g.memory_used_mib for g in gpus]
            assert min(used[:4]) > 100000 and max(used[4:]) < 10  # a TP-4 server holds GPUs 0-3 only
            fwd = await remote.forward_local_port(port)
            async with httpx.AsyncClient(trust_env=False, timeout=60) as client:
                gen = asyncio.create_task(
                    client.post(
                        f"http://127.0.0.1:{fwd.local_port}/generate",
                        json={"text": "hi", "sampling_params": {"max_new_tokens": 400, "ignore_eos": True}},
                    )
                )
                busy = []
                while not gen.done():
                    gpus, _ = await query_gpus(remote)
                    busy.append(gpus[0].utilization_pct)
                    await asyncio.sleep(0.5)
                assert (await gen).status_code == 200
            await fwd.close()
            assert max(busy) > 50, busy
            gpus, _ = await query_gpus(remote)
            assert gpus[2].throttled and "sw_thermal_slowdown" in gpus[2].throttle_reasons
            assert not any(g.throttled for i, g in enumerate(gpus) if i != 2)
            reader.cancel()
        # the stream's end killed the sim: its GPUs are free again
        deadline = time.monotonic() + 60
        while True:
            gpus, _ = await query_gpus(remote)
            if all(g.memory_used_mib < 10 and not g.throttled for g in gpus):
                break
            assert time.monotonic() < deadline, gpus
            await asyncio.sleep(0.3)
    finally:
        await remote.close()


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")
def test_demo_hosts_pane_shows_8_gpus_and_the_throttled_one(tmp_path: Path) -> None:
    tmux = Tmux("specdebug-test-gpus")
    tmux.kill()
    tmux.new_session(
        "demo",
        f"{sys.executable} -m specdebug.cli demo -c eagle3-3step.toml --time-scale 0.02 "
        f"--throttle-gpu 3 --throttle-after 0 --session {tmp_path / 'session'}; sleep 30",
    )
    try:
        tmux.wait_screen("demo", lambda s: "READY after" in s, 90)  # the startup pane: server up
        tmux("send-keys", "-t", "demo", "1")  # the hosts pane
        # a refresh after ready: the server's memory is on every GPU, GPU 3 throttles
        screen = tmux.wait_screen(
            "demo", lambda s: "sw_thermal_slowdown" in s and s.count("123.6/140.4 GiB") == 8, 60
        )
        assert "8 (1 throttled)" in screen
        assert screen.count("NVIDIA H200") == 8
        print(screen)  # the text capture for the record
        tmux("send-keys", "-t", "demo", "q")
        tmux.wait_screen("demo", lambda s: "simbox" not in s, 30)
    finally:
        tmux.kill()
