"""Every verb on a real vLLM server (the CPU build, a tiny dummy-weight Llama, TP 2, n-gram speculation).

One server for the module (a real start takes 30-60 s of both cores); the tests read it in order and the
last one stops it.  What each test checks is what a user of real vLLM expects from that verb; where the
simulator's vLLM mode shows something else, the simulator is wrong (tests/integration keeps it honest).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests import clifork
from tests.real.engine import NGRAM, VllmVenv, server_argv, server_env, write_profile
from tests.sshd_harness import Sshd, free_port
from tests.tmux_harness import Tmux

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def specdebug(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return clifork.run(
        [sys.executable, "-m", "specdebug.cli", *args], capture_output=True, text=True, timeout=timeout
    )


def last_json(r: subprocess.CompletedProcess) -> dict:
    return json.loads(r.stdout.strip().splitlines()[-1])


class Server:
    """The module's real server: its profile, the ssh config that reaches the box, the launch verdict."""

    def __init__(self, sshd: Sshd, profile: Path, port: int) -> None:
        self.cfg = str(sshd.config_path)
        self.profile = profile
        self.port = port
        self.verdict: dict = {}

    def run(self, verb: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return specdebug(verb, "-F", self.cfg, "gpubox", "-c", str(self.profile), *args, timeout=timeout)

    @property
    def log(self) -> Path:
        return self.profile.with_suffix(".log")

    def pgid(self) -> int:
        return int(self.verdict["pgid"]) if "pgid" in self.verdict else int(self.verdict["pid"])


@pytest.fixture(scope="module")
def state_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("real-servers")


@pytest.fixture(autouse=True)
def _one_state_dir(box_state_dir: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The module's tests share the server's record: one state folder for all of them (not one a test)."""
    monkeypatch.setenv("SPECDEBUG_STATE_DIR", str(state_dir))


@pytest.fixture(scope="module")
def server(
    sshd: Sshd, vllm_venv: VllmVenv, tiny_model: Path, state_dir: Path, tmp_path_factory
) -> Iterator[Server]:
    os.environ["SPECDEBUG_STATE_DIR"] = str(state_dir)
    folder = tmp_path_factory.mktemp("real-vllm")
    port = free_port()
    profile = write_profile(
        folder, server_argv(vllm_venv, tiny_model, port), server_env(), port, name="real-tp2-ngram"
    )
    srv = Server(sshd, profile, port)
    started = time.monotonic()
    r = srv.run("launch", "--wait", "--json", timeout=500)
    print(f"real vLLM launch: {time.monotonic() - started:.1f} s, exit {r.returncode}")
    try:
        srv.verdict = last_json(r)
    except (ValueError, IndexError):
        srv.verdict = {}
    assert r.returncode == 0 and srv.verdict.get("verdict") == "ready", r.stdout[-3000:] + r.stderr[-3000:]
    try:
        yield srv
    finally:
        specdebug("stop", "-F", srv.cfg, "gpubox", "-c", str(profile), "--grace", "20", timeout=120)
        _kill_group(srv.verdict)


def _kill_group(verdict: dict) -> None:
    pgid = verdict.get("pgid") or verdict.get("pid")
    if pgid:
        try:
            os.killpg(int(pgid), signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _group_alive(pgid: int) -> list[int]:
    """PIDs still in the group (this test's own server group only, not a scan by name)."""
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(int(entry.name))
    return alive


def stream_once(
    port: int, prompt: str = "the quick brown fox jumps over the lazy dog " * 4, tokens: int = 64
) -> str:
    body = {"model": "tiny-llama", "prompt": prompt, "max_tokens": tokens, "ignore_eos": True}
    r = httpx.post(f"http://127.0.0.1:{port}/v1/completions", json=body, timeout=120)
    r.raise_for_status()
    return r.json()["choices"][0]["text"]


# --- a config error, before the module's server ---------------------------------------------------


def test_a_config_error_is_named_by_its_reason_and_a_relaunch_is_not_refused(
    sshd: Sshd, vllm_venv: VllmVenv, tiny_model: Path, tmp_path: Path
) -> None:
    """--max-model-len above the model's 2048: pydantic's ValidationError, whose NEXT line says what is
    wrong; the reason must carry it.  The failed API server stays a zombie for a while: the relaunch
    right after must start (and fail the same way), not be refused as "already running"."""
    port = free_port()
    argv = [a for a in server_argv(vllm_venv, tiny_model, port, tp=1, spec_tokens=None)]
    argv[argv.index("--max-model-len") + 1] = "4096"
    profile = write_profile(tmp_path, argv, server_env(1), port, name="real-bad-len")
    cfg = str(sshd.config_path)
    for attempt in (1, 2):
        r = specdebug("launch", "-F", cfg, "gpubox", "-c", str(profile), "--wait", "--json", timeout=300)
        print(f"attempt {attempt}: exit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-1000:]}")
        assert r.returncode == 1, r.stdout + r.stderr
        verdict = last_json(r)
        assert verdict["verdict"] == "failed", verdict
        assert "max_model_len" in verdict["reason"] and "4096" in verdict["reason"], verdict["reason"]
        _kill_group(verdict)


# --- the module's server ----------------------------------------------------------------------------


def test_launch_watched_the_real_phases_to_ready(server: Server) -> None:
    phases = [p["name"] for p in server.verdict["phases"]]
    print("phases:", server.verdict["phases"])
    for phase in ("engine_init", "load_weights", "http_server", "ready"):
        assert phase in phases, (phase, phases)
    r = server.run("status", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    status = json.loads(r.stdout)
    print("status:", status)
    assert status.get("state", status.get("status")) == "running", status


def test_env_reached_the_engine_core_and_every_tp_worker(server: Server) -> None:
    r = server.run("env", "--json")
    report = json.loads(r.stdout)
    assert r.returncode == 0, (r.stderr, report.get("summary"))
    titles = sorted(w["title"].split(" ")[0] for w in report["workers"])
    print("env workers:", titles, report["summary"])
    assert titles == ["VLLM::EngineCore", "VLLM::Worker_TP0", "VLLM::Worker_TP1"]
    for w in report["workers"]:
        got = json.dumps(w)
        for var in ("NCCL_PROTO", "NCCL_ALGO", "NCCL_P2P_LEVEL"):
            assert var in got, (var, w["title"])


def test_bench_names_the_client_figures_and_the_servers_own(server: Server, tmp_path: Path) -> None:
    r = server.run("bench", "--session", str(tmp_path / "session"), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    res = json.loads(r.stdout)
    print("bench:", json.dumps({k: res.get(k) for k in ("decode_tok_s", "server", "server_prom")})[:3000])
    assert res["status"] == "done" and res["successful_requests"] >= 3
    assert res["decode_tok_s"] > 0
    prom = res.get("server_prom") or {}
    assert prom.get("status") == "ok", prom
    rates = prom["rates"]
    assert rates["engine"] == "vllm" and rates["dp_ranks"] == 1, rates
    assert rates["accept_length"] is not None and 1.0 < rates["accept_length"] <= 4.0, rates
    # every server-side figure of the text names what it is; the log's 10 s average is never shown bare
    text = server.run("bench", "--session", str(tmp_path / "session2"))
    assert text.returncode == 0, text.stdout + text.stderr
    print(text.stdout)
    for line in text.stdout.splitlines():
        if line.strip().startswith("server"):
            assert "gen" not in line or "window" in line or "interval" in line or "avg" in line, line


def test_metrics_reads_one_engine_and_acceptance_since_start(server: Server) -> None:
    stream_once(server.port)
    r = server.run("metrics", "--json", "--interval", "0.5")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    print("metrics:", json.dumps(out)[:3000])
    assert out["status"] == "ok" and out["engine"] == "vllm"
    assert out["rates"]["dp_ranks"] == 1 and out["since_start"]["dp_ranks"] == 1
    since = out["since_start"]
    assert since["accept_length"] is not None and 1.0 < since["accept_length"] <= 4.0
    assert len(since["per_position"]) == 3 and all(0 <= p <= 1 for p in since["per_position"])
    # a window without traffic still shows the acceptance since start, saying so
    text = server.run("metrics", "--interval", "0.3")
    print(text.stdout)
    assert text.returncode == 0
    assert re.search(r"accept", text.stdout, re.I) and "since" in text.stdout.lower(), text.stdout


def test_scan_and_grep_read_the_real_log(server: Server) -> None:
    stream_once(server.port)
    r = specdebug("scan", "-F", server.cfg, f"gpubox:{server.log}", "--last-run", "--json")
    assert r.returncode == 0, r.stderr
    scan = json.loads(r.stdout)
    assert scan["pack"] == "vllm"
    assert scan["metrics"]["mean_acceptance_length"]["n"] >= 1
    assert 1.0 < scan["metrics"]["mean_acceptance_length"]["mean"] <= 4.0
    r = specdebug("grep", "-F", server.cfg, f"gpubox:{server.log}", "-e", "SpecDecoding metrics", "--json")
    assert r.returncode == 0, r.stderr
    hits = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    assert hits and all("SpecDecoding metrics" in h["line"] for h in hits)
    # --follow sees a line the server writes after it started (a request's access-log line)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "specdebug.cli",
            "grep",
            "-F",
            server.cfg,
            f"gpubox:{server.log}",
            "-e",
            "POST /v1/completions",
            "--follow",
            "--json",
        ],  # fmt: skip
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        line = ""
        while time.monotonic() < deadline and not line:
            stream_once(server.port, tokens=8)
            import selectors

            sel = selectors.DefaultSelector()
            sel.register(proc.stdout, selectors.EVENT_READ)  # type: ignore[arg-type]
            if sel.select(timeout=5):
                line = proc.stdout.readline()  # type: ignore[union-attr]
        assert "POST /v1/completions" in line, line
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)


def test_spec_takes_the_cycle_from_the_stream_or_says_why_not(server: Server, tmp_path: Path) -> None:
    """vLLM logs no verify time: the cycle is the stream's gap between token bursts, where one burst is one
    step.  Where most bursts merged several steps (this 2-core machine at TP 2: the API server or the client
    fell behind), the stream shows no cycle and spec says so instead of a figure it cannot defend."""
    session = tmp_path / "session"
    r = server.run("bench", "--session", str(session), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    r = specdebug(
        "spec", "-F", server.cfg, "gpubox", "-c", str(server.profile), "--session", str(session), "--json"
    )
    print(r.stdout[-3000:], r.stderr[-1000:])
    assert r.returncode in (0, 1), r.stderr
    out = json.loads(r.stdout)
    text = json.dumps(out)
    assert "NaN" not in text and "Infinity" not in text
    assert "stream" in text, "the cycle time's source (the stream's bursts) is named"
    r = specdebug("spec", "-F", server.cfg, "gpubox", "-c", str(server.profile), "--session", str(session))
    print(r.stdout)
    if "cycle      ? ms" in r.stdout:  # no figure: the reason is given
        assert "merged several steps" in r.stdout or "fewer than" in r.stdout, r.stdout
    else:
        assert "from the stream" in r.stdout, r.stdout


def test_stacks_name_the_real_frames_and_roles(server: Server) -> None:
    r = server.run("stacks", "--json", timeout=180)
    print(r.stdout[-4000:], r.stderr[-1000:])
    assert r.returncode == 0, r.stderr
    text = r.stdout
    assert "no known frame" not in text
    out = json.loads(text)
    flat = json.dumps(out)
    assert "EngineCore" in flat and "Worker_TP0" in flat and "Worker_TP1" in flat
    plain = server.run("stacks", timeout=180).stdout
    print(plain)
    assert "differs" not in plain, "the engine core is not a rank beside TP rank 0"


def test_drift_finds_a_patched_engine_file_and_not_bytecode(server: Server, vllm_venv: VllmVenv) -> None:
    target = next((vllm_venv.path / "lib").glob("python3*/site-packages/vllm/collect_env.py"))
    original = target.read_bytes()
    backup = vllm_venv.path / ".specdebug-drift-backup"
    backup.write_bytes(original)  # install.sh-independent: a killed run's patch is undone by the next
    try:
        target.write_bytes(original + b"\n# patched by specdebug's real-engine tier\n")
        r = server.run("drift", "--json", timeout=300)
        assert r.returncode in (0, 1), r.stderr
        out = r.stdout
        print(out[-3000:])
        assert "vllm/collect_env.py" in out
        assert ".pyc" not in out and "__pycache__" not in out
    finally:
        target.write_bytes(original)
        backup.unlink()


def test_the_tui_shows_the_real_server(server: Server) -> None:
    tmux = Tmux("specdebug-real-tui")
    tmux.kill()
    app = f"{sys.executable} -m specdebug.cli -F {server.cfg} -c {server.profile} gpubox"
    tmux.new_session(
        "tui", f"env SPECDEBUG_STATE_DIR={os.environ['SPECDEBUG_STATE_DIR']} {app}; sleep 30", 160, 45
    )
    try:
        tmux.wait_screen("tui", lambda s: "connected" in s, 60)
        tmux("send-keys", "-t", "tui", "2")
        screen = tmux.wait_screen("tui", lambda s: "running" in s.lower() or "ready" in s.lower(), 60)
        print(screen)
        tmux("send-keys", "-t", "tui", "4")
        screen = tmux.wait_screen("tui", lambda s: "Worker_TP1" in s, 60)
        print(screen)
        assert "EngineCore" in screen
        tmux("send-keys", "-t", "tui", "q")
        tmux.wait_screen("tui", lambda s: "Worker_TP1" not in s, 30)
    finally:
        tmux.kill()


def _group_titles(pgid: int) -> list[str]:
    """The retitled processes (VLLM::...) of one process group: the first word of each cmdline."""
    titles = []
    for pid in _group_alive(pgid):
        try:
            first = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        if first.startswith("VLLM::"):
            titles.append(first.split(" ")[0])
    return sorted(titles)


def _metric_shapes(port: int) -> dict[str, set[str]]:
    """vllm:* families of /metrics -> their label keys (samples' suffixes folded into the family)."""
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30).text
    shapes: dict[str, set[str]] = {}
    for line in text.splitlines():
        if not line.startswith("vllm:"):
            continue
        head = line.rsplit(" ", 1)[0]
        name, _, labels = head.partition("{")
        name = re.sub(r"_(total|bucket|sum|count|created)$", "", name)
        keys = {kv.split("=", 1)[0] for kv in re.findall(r'(\w+)="', labels)} - {"le"}
        shapes.setdefault(name, set()).update(keys)
    return shapes


def _scan_shapes(cfg: str, log: Path) -> tuple[set[str], set[str]]:
    r = specdebug("scan", "-F", cfg, f"gpubox:{log}", "--last-run", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    return set(out["metrics"]), set(out.get("events", {}))


def test_the_sims_vllm_mode_shows_the_real_shapes(server: Server, tmp_path: Path) -> None:
    """Where the sim and the real engine differ, the sim is wrong: process titles, the /metrics families the
    reader reads with their label keys, and what the vLLM pack reads from the log agree."""
    from specdebug.sim.box.local import start_local_sim

    stream_once(server.port)
    log = tmp_path / "sim.log"
    args = ["--engine", "vllm", "serve", "tiny-llama", "-tp", "2", "--speculative-config", json.dumps(NGRAM)]
    with start_local_sim(
        args, log_file=log, time_scale=0.02, extra_env={"VLLM_LOG_STATS_INTERVAL": "1"}
    ) as sim:
        sim.wait_ready(120)
        stream_once(sim.port)
        deadline = time.monotonic() + 60
        while "SpecDecoding metrics" not in log.read_text(errors="replace") and time.monotonic() < deadline:
            time.sleep(0.5)
        sim_titles = _group_titles(sim.proc.pid)
        sim_metrics = _metric_shapes(sim.port)
        sim_scan = _scan_shapes(server.cfg, log)
    real_titles = _group_titles(server.pgid())
    real_metrics = _metric_shapes(server.port)
    real_scan = _scan_shapes(server.cfg, server.log)
    print("titles real/sim:", real_titles, sim_titles)
    assert sim_titles == real_titles
    read = {m for m in real_metrics if m in READ_METRICS}
    print("metrics the reader reads, real:", sorted(read))
    for name in READ_METRICS:
        real_keys, sim_keys = real_metrics.get(name), sim_metrics.get(name)
        print(f"  {name}: real {sorted(real_keys or [])} sim {sorted(sim_keys or [])}")
        assert (real_keys is None) == (sim_keys is None), name
        assert real_keys == sim_keys, name
    print("scan metrics real/sim:", sorted(real_scan[0]), sorted(sim_scan[0]))
    print("scan events real/sim:", sorted(real_scan[1]), sorted(sim_scan[1]))
    assert real_scan[0] == sim_scan[0]
    assert real_scan[1] <= sim_scan[1]


READ_METRICS = (
    "vllm:spec_decode_num_drafts", "vllm:spec_decode_num_draft_tokens", "vllm:spec_decode_num_accepted_tokens",
    "vllm:spec_decode_num_accepted_tokens_per_pos", "vllm:num_requests_waiting", "vllm:num_requests_running",
    "vllm:kv_cache_usage_perc", "vllm:generation_tokens", "vllm:prompt_tokens", "vllm:request_success",
    "vllm:time_to_first_token_seconds",
)  # fmt: skip


def test_stop_leaves_nothing_running(server: Server) -> None:
    pgid = server.pgid()
    assert _group_alive(pgid), "the server runs before stop"
    r = server.run("stop", "--grace", "30", timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    deadline = time.monotonic() + 60
    while _group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _group_alive(pgid), f"still running in group {pgid}: {_group_alive(pgid)}"
    r = server.run("status", "--json")
    print(r.stdout)
    assert r.returncode != 0 or "running" not in r.stdout
