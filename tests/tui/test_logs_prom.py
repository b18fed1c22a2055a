"""Logs pane: the server's /metrics shown beside the log-derived numbers, each with its source.

Runs the simulated box as vLLM on this machine (the pane follows its log and reads /metrics through the
remote's forward, here a local port), and as SGLang without --enable-metrics (the pane says metrics off).
"""

from __future__ import annotations

import json

import httpx
from textual.widgets import Static

from specdebug.core.profiles import Profile
from specdebug.sim.box.local import start_local_sim
from specdebug.tui.panes.logs import LogsPane
from tests.tui.pilotwait import until
from tests.tui.test_logs_pane import LogsApp
from tests.unit.test_log_follow_local import LocalRemote

SPEC = '{"method": "eagle3", "model": "d", "num_speculative_tokens": 2}'


def _profile(log_file: str, kind: str, port: int) -> Profile:
    """A real profile (the pane reads it typed), pointing at the sim's port and log."""
    return Profile.model_validate(
        {"name": "t", "server": {"argv": ["true"], "kind": kind, "port": port, "log_file": log_file}}
    )


async def _pane_text(app, pilot, want: str, timeout_s: float = 60.0) -> str:
    """The panel's text once it holds `want` (a deadline, not a count of pauses), else as it is."""
    box = app.query_one("#metrics-prom", Static)
    await until(pilot, lambda: want in str(box.render()), timeout_s)
    return str(box.render())


async def test_metrics_panel_shows_vllm_counters_with_their_source(tmp_path) -> None:
    args = ["--engine", "vllm", "serve", "m", "-tp", "1", "--speculative-config", SPEC]
    with start_local_sim(args, log_file=tmp_path / "v.log", stdout=(tmp_path / "out.log").open("w")) as sim:
        sim.wait_ready(60)
        body = {"model": "m", "prompt": "hi", "max_tokens": 48, "ignore_eos": True}
        httpx.post(sim.url + "/v1/completions", json=body, timeout=30).raise_for_status()
        remote = LocalRemote()  # the box is this machine: a forward is the port itself
        remote.state_dir = str(tmp_path / "servers")  # the box's server records: none here
        app = LogsApp(lines=[], remote=remote)
        app.ctx.profile = _profile(str(tmp_path / "out.log"), "vllm", sim.port)
        async with app.run_test(size=(140, 40)) as pilot:
            pane = app.query_one(LogsPane)
            pane.start_follow(str(tmp_path / "out.log"), this_run=True)
            text = await _pane_text(app, pilot, "accept length")
            assert "server /metrics" in text and "accept length" in text, text
            assert "1 + vllm:spec_decode_num_accepted_tokens / num_drafts" in text
            assert "per-position acceptance" in text and "vllm:kv_cache_usage_perc" in text
            assert "log lines" in str(app.query_one("#metrics-title", Static).render())
            pane.action_stop()
    assert json.loads(sim.sidecar_path.read_text())["engine"] == "vllm"


async def test_metrics_panel_says_metrics_off_without_enable_metrics(tmp_path) -> None:
    with start_local_sim(["--tp", "1"], log_file=tmp_path / "s.log") as sim:
        sim.wait_ready(60)
        remote = LocalRemote()  # the box is this machine: a forward is the port itself
        remote.state_dir = str(tmp_path / "servers")  # the box's server records: none here
        app = LogsApp(lines=[], remote=remote)
        app.ctx.profile = _profile(str(tmp_path / "s.log"), "sglang", sim.port)
        async with app.run_test(size=(140, 40)) as pilot:
            pane = app.query_one(LogsPane)
            pane.start_follow(str(tmp_path / "s.log"), this_run=True)
            text = await _pane_text(app, pilot, "metrics off")
            assert "add --enable-metrics" in text, text
            pane.action_stop()
