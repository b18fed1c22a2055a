"""Start and stop a sim as a local subprocess (tests, demo): own session, killed as a whole group.

Usage: `with start_local_sim(["--tp", "2"], log_file=tmp_path / "sim.log") as sim: sim.wait_ready()`,
then talk to `sim.url`; leaving the block SIGKILLs the process group (launcher and workers).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from specdebug.sim.box.ports import free_port
from specdebug.sim.server.sglang.launcher import SIDECAR_SUFFIX


def sim_argv(args: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "specdebug.sim", *args]


class LocalSim:
    """A running sim process; `stop()` (or leaving the `with`) kills its whole process group."""

    def __init__(self, proc: subprocess.Popen, port: int, log_file: Path, host: str = "127.0.0.1"):
        self.proc = proc
        self.port = port
        self.host = host
        self.log_file = log_file

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def sidecar_path(self) -> Path:
        return Path(f"{self.log_file}{SIDECAR_SUFFIX}")

    def sidecar(self) -> dict[str, Any]:
        try:
            return json.loads(self.sidecar_path.read_text())
        except (OSError, ValueError):
            return {}

    def log_text(self) -> str:
        try:
            return self.log_file.read_text(errors="replace")
        except OSError:
            return ""

    def wait_for(self, predicate: Any, timeout: float = 30.0, interval: float = 0.02) -> Any:
        """Poll `predicate()` until truthy (returned) or the timeout (TimeoutError)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(interval)
        raise TimeoutError(f"sim condition not met in {timeout}s; log tail:\n{self.log_text()[-3000:]}")

    def wait_ready(self, timeout: float = 30.0) -> dict[str, Any]:
        """Wait until the sidecar says ready; raises if the sim exits first."""

        def ready() -> dict[str, Any] | None:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"sim exited ({self.proc.returncode}); log tail:\n{self.log_text()[-3000:]}"
                )
            data = self.sidecar()
            return data if data.get("state") == "ready" else None

        return self.wait_for(ready, timeout)

    def wait_exit(self, timeout: float = 15.0) -> int:
        return self.proc.wait(timeout)

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def stop(self) -> None:
        """SIGKILL the process group (launcher, schedulers, detokenizer, resource tracker)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            pass

    def __enter__(self) -> LocalSim:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_local_sim(
    args: Sequence[str] = (),
    *,
    log_file: Path,
    port: int | None = None,
    time_scale: float | None = 0.02,
    env: Mapping[str, str] | None = None,
    extra_env: Mapping[str, str] | None = None,
    stdout: Any = subprocess.DEVNULL,
    host: str = "127.0.0.1",
) -> LocalSim:
    """Start `python -m specdebug.sim` in its own session, on `host` (a loopback address) and a free port,
    logging to log_file."""
    port = port or free_port(host)
    argv = list(args) + ["--host", host, "--port", str(port), "--log-file", str(log_file)]
    if time_scale is not None:
        argv += ["--time-scale", str(time_scale)]
    full_env = dict(os.environ if env is None else env)
    full_env.update(extra_env or {})
    proc = subprocess.Popen(
        sim_argv(argv),
        env=full_env,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=subprocess.STDOUT if stdout is not subprocess.DEVNULL else subprocess.DEVNULL,
        start_new_session=True,
    )
    return LocalSim(proc, port, Path(log_file), host=host)


def pid_alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie (reaped-or-not does not matter to callers)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 :].split()[0] not in ("Z", "X")


def children_titles(parent: int) -> dict[int, str]:
    """{pid: cmdline title} of the live children of `parent` (from /proc)."""
    out: dict[int, str] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            cmdline = (d / "cmdline").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if int(fields[1]) == parent and fields[0] not in ("Z", "X"):
            out[int(d.name)] = cmdline.replace(b"\0", b" ").decode(errors="replace").strip()
    return out


def stream_completion_rate(
    url: str, max_tokens: int = 128, *, timeout: float = 60.0
) -> tuple[float, int, dict]:
    """Stream one /v1/completions request (ignore_eos); returns (decode tok/s, tokens, usage).

    Rate: the decode rate a client sees (see decode_rate), which the sim's cost model predicts
    (`model.expected_single_stream_tok_s`)."""
    import httpx

    times: list[tuple[float, int]] = []
    usage: dict = {}
    body = {"model": "m", "prompt": "Say something long.", "max_tokens": max_tokens, "stream": True,
            "ignore_eos": True, "stream_options": {"include_usage": True}}  # fmt: skip
    with httpx.stream("POST", url + "/v1/completions", json=body, timeout=timeout) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data: "):
                continue
            if line == "data: [DONE]":
                break
            obj = json.loads(line[6:])
            if obj["choices"] and obj["choices"][0].get("text"):
                times.append((time.monotonic(), len(obj["choices"][0]["text"].split())))
            if obj.get("usage"):
                usage = obj["usage"]
        else:
            raise RuntimeError("stream ended without data: [DONE]")
    return decode_rate(times), sum(n for _, n in times), usage


def decode_rate(arrivals: Sequence[tuple[float, int]]) -> float:
    """Tokens per second from (arrival time, tokens in the chunk) of a stream's chunks: the slope of
    the tokens received so far against time (least squares, over every chunk after the first).

    Why not (tokens after the first) / (last - first): one chunk held up on a loaded client or in
    the SSH forward moves that ratio by the whole delay (80 ms on a 1 s stream: -8 %), while the
    slope over ~100 chunks moves by a small part of it."""
    if not arrivals:
        return 0.0
    t0, points, total = arrivals[0][0], [(0.0, 0.0)], 0
    for t, n in arrivals[1:]:
        total += n
        points.append((t - t0, float(total)))
    return _slope(points)


def _slope(points: Sequence[tuple[float, float]]) -> float:
    """Least-squares slope (0.0 with fewer than two distinct x): the sim's own, as the sim imports
    nothing of core (the simulated box must not share the tool's code it is there to check)."""
    if len({x for x, _ in points}) < 2:
        return 0.0
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    sxx = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / sxx
