"""How fast a token stream can the built-in benchmark client measure? (so it is never the bottleneck)

    python tests/perf/bench_client.py [--tokens N] [--no-ssh]

A zero-step-time OpenAI SSE server (tests/fixtures/bench/fake_sse.py, one token per chunk, as fast as
asyncio can write) runs in its own process on 127.0.0.1. Against the same stream we measure:
  bare      a raw asyncio socket reader that only counts `data:` events (the ceiling of one stream)
  builtin   specdebug's client (httpx, SSE parsing, per-chunk timing), one stream
  builtin4  the same with 4 concurrent streams (total tokens/s)
  forward   the builtin client through an SSH local forward from a loopback sshd (skip: --no-ssh)
  sim       the builtin client against the sim at its modelled speed and with --decode-scale 0.001
            (a server 1000x faster: then the client and the sim's own Python are the limit; skip: --no-sim)
The sim's fastest modelled single stream is ~94 tok/s; real EAGLE servers reach a few hundred per stream.
Last line:  RESULT bench_client bare_tok_s=.. builtin_tok_s=.. builtin_ratio=.. builtin4_tok_s=.. forward_tok_s=..
            RESULT bench_client_sim sim_tok_s=.. fast_sim_tok_s=.. fast_over_modelled=.. fast_over_bare=..
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from specdebug.core.bench.builtin import BuiltinParams, run_builtin  # noqa: E402

SERVER = """
import asyncio, sys
from tests.fixtures.bench.fake_sse import FakeServerConfig, FakeSSEServer
async def main():
    async with FakeSSEServer(FakeServerConfig(step_s=0.0, continuous_usage=False)) as srv:
        print(srv.port, flush=True)
        await asyncio.Event().wait()
asyncio.run(main())
"""


async def bare_reader(port: int, tokens: int) -> float:
    """Tokens/s seen by a socket reader that does nothing but count SSE events."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    body = json.dumps({"model": "m", "prompt": "hi", "max_tokens": tokens, "stream": True}).encode()
    writer.write(
        b"POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n" % len(body) + body
    )
    await writer.drain()
    pat = b'"text_completion"'  # once per token chunk (the final usage chunk has no object field)
    count = 0
    t0 = None
    tail = b""
    while True:
        data = await reader.read(1 << 16)
        if not data:
            break
        if t0 is None:
            t0 = time.perf_counter()
        buf = tail + data  # tail is shorter than pat: no occurrence is counted twice
        count += buf.count(pat)
        tail = buf[-(len(pat) - 1) :]
        if b"[DONE]" in buf:
            break
    assert count == tokens, (count, tokens)
    elapsed = time.perf_counter() - (t0 or time.perf_counter())
    writer.close()
    return count / elapsed if elapsed > 0 else 0.0


async def builtin(url: str, tokens: int, concurrency: int = 1) -> float:
    params = BuiltinParams(
        requests=concurrency,
        concurrency=concurrency,
        output_len=tokens,
        input_len=8,
        warmup_requests=1,
        model="m",
    )
    res = await run_builtin(url, params)
    assert res.status == "done", res.errors
    assert res.total_output_tokens == tokens * concurrency
    return res.decode_tok_s if concurrency == 1 else res.output_tok_s


async def through_forward(port: int, tokens: int) -> tuple[float, float] | None:
    """(bare reader through an OpenSSH `ssh -L` forward, builtin client through specdebug's own forward),
    both to the same server through the same loopback sshd: the issue's "same forward" comparison."""
    try:
        from tests.boxes import ssh_box
        from tests.sshd_harness import free_port, start_sshd
    except ImportError:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        try:
            sshd = start_sshd(Path(tmp))
        except Exception as exc:  # no sshd binary here
            print(f"forward: skipped ({exc})")
            return None
        local = free_port()
        tunnel = subprocess.Popen(
            [
                "ssh",
                "-F",
                str(sshd.config_path),
                "-N",
                "-o",
                "ExitOnForwardFailure=yes",
                "-L",
                f"127.0.0.1:{local}:127.0.0.1:{port}",
                sshd.alias,
            ],
            stdin=subprocess.DEVNULL,
        )
        try:
            for _ in range(100):  # until the tunnel listens
                try:
                    _r, w = await asyncio.open_connection("127.0.0.1", local)
                    w.close()
                    break
                except OSError:
                    await asyncio.sleep(0.1)
            bare = max([await bare_reader(local, tokens) for _ in range(2)])
            remote = ssh_box(sshd.alias, ssh_config=sshd.config_path)
            await remote.start()
            await remote.wait_connected(15)
            fwd = await remote.forward_local_port(port)
            try:
                mine = max([await builtin(f"http://127.0.0.1:{fwd.local_port}", tokens) for _ in range(2)])
            finally:
                await fwd.close()
                await remote.close()
            return bare, mine
        finally:
            tunnel.terminate()
            tunnel.wait()
            sshd.stop()


async def against_sim(decode_scale: float, tokens: int) -> float:
    """The builtin client's single-stream tokens/s against a local sim with this --decode-scale."""
    from specdebug.sim.box.local import start_local_sim

    with tempfile.TemporaryDirectory() as tmp:
        argv = ["--model-path", "m", "--tp", "1", "--decode-scale", str(decode_scale)]
        with start_local_sim(argv, log_file=Path(tmp) / "sim.log", time_scale=0.02) as sim:
            sim.wait_ready(60)
            return max([await builtin(sim.url, tokens) for _ in range(2)])


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=100_000)
    ap.add_argument("--no-ssh", action="store_true")
    ap.add_argument("--no-sim", action="store_true")
    args = ap.parse_args()
    server = subprocess.Popen([sys.executable, "-c", SERVER], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        url = f"http://127.0.0.1:{port}"
        await bare_reader(port, 2000)  # warm up
        bare = max([await bare_reader(port, args.tokens) for _ in range(3)])
        print(f"bare reader       {bare:12,.0f} tok/s")
        mine = max([await builtin(url, args.tokens) for _ in range(3)])
        print(f"builtin client    {mine:12,.0f} tok/s  ({mine / bare:.2f} of bare)")
        four = await builtin(url, args.tokens // 4, concurrency=4)
        print(f"builtin x4        {four:12,.0f} tok/s total")
        pair = None if args.no_ssh else await through_forward(port, args.tokens // 2)
        fwd_bare, fwd = pair if pair is not None else (0.0, 0.0)
        if pair is not None:
            print(
                f"via SSH forwards  bare through ssh -L {fwd_bare:12,.0f} tok/s; builtin through its own "
                f"forward {fwd:12,.0f} tok/s ({fwd / fwd_bare:.2f} of bare; goal >= 0.9)"
            )
        print(
            f"RESULT bench_client bare_tok_s={bare:.0f} builtin_tok_s={mine:.0f} builtin_ratio={mine / bare:.3f} "
            f"builtin4_tok_s={four:.0f} forward_bare_tok_s={fwd_bare:.0f} forward_tok_s={fwd:.0f} "
            f"forward_ratio={fwd / fwd_bare if fwd_bare else 0:.3f}"
        )
        if not args.no_sim:
            slow = await against_sim(1.0, 300)
            fast = await against_sim(0.001, 20_000)
            print(f"sim (modelled)    {slow:12,.0f} tok/s   sim --decode-scale 0.001 {fast:12,.0f} tok/s")
            print(
                f"RESULT bench_client_sim sim_tok_s={slow:.0f} fast_sim_tok_s={fast:.0f} "
                f"fast_over_modelled={fast / slow:.1f} fast_over_bare={fast / bare:.3f}"
            )
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    asyncio.run(main())
