"""Good/bad sim profile pairs for bisection tests and the perf script: a fast sim (tp 1, no startup
delays, short benchmarks) that differs in chosen knobs; the bad side adds `bad_flags` / drops env."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from tests.sshd_harness import free_port

# The story's good config: EAGLE-3 2 steps (topk 1, 3 draft tokens) with the NCCL tuning env (~94 tok/s).
BASE = [
    "--tp",
    "1",
    "--time-scale",
    "0",
    "--speculative-algorithm",
    "EAGLE3",
    "--speculative-draft-model-path",
    "draft",
    "--speculative-num-steps",
    "2",  # topk 1 and 3 draft tokens by default; left out so that PAIR's flags are new knobs
    "--decode-log-interval",
    "5",
    "--profile-verify",
]
NCCL = {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "NCCL_P2P_LEVEL": "SYS"}
# knobs that change nothing the sim's cost model sees
HARMLESS_FLAGS = [
    ["--schedule-policy", "lpm"],
    ["--watchdog-timeout", "600"],
    ["--max-prefill-tokens", "8192"],
    ["--chunked-prefill-size", "4096"],
    ["--attention-backend", "fa3"],
    ["--served-model-name", "kimi"],
    ["--log-requests"],
]
CULPRIT = ["--disable-cuda-graph"]  # every step 1.35x slower: 94 -> ~70 tok/s
PAIR = [["--speculative-eagle-topk", "8"], ["--speculative-num-draft-tokens", "16"]]  # 94 -> 66 together only


def harmless_env(n: int) -> dict[str, str]:
    return {f"SIM_HARMLESS_{i:02d}": "1" for i in range(n)}


def write_pair(
    folder: Path,
    *,
    bad_flags: list[list[str]],
    bad_env: dict[str, str] | None = None,
    good_flags: list[list[str]] | None = None,
    sim_extra: list[str] | None = None,
    requests: int = 2,
    output_len: int = 64,
    port: int | None = None,
    tag: str = "",
    ready_timeout: int = 60,
) -> tuple[Path, Path]:
    """good.toml and bad.toml in `folder` (same port): the bad side = good + bad_flags + bad_env."""
    folder.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    paths = []
    for side in ("good", "bad"):
        flags = [t for f in (good_flags or []) for t in f]
        env = dict(NCCL)
        if side == "bad":
            flags += [t for f in bad_flags for t in f]
            env.update(bad_env or {})
        argv = [sys.executable, "-m", "specdebug.sim", *BASE, *(sim_extra or []), "--port", str(port), *flags]
        name = f"{tag}{side}"
        text = "\n".join(
            [
                f'name = "{name}"',
                "[server]",
                f"argv = {json.dumps(argv)}",
                f"log_file = {json.dumps(str(folder / f'{name}.log'))}",
                f"port = {port}",
                'kind = "sglang"',
                "[server.env]",
                *[f"{k} = {json.dumps(v)}" for k, v in env.items() if v is not None],
                "[ready]",
                f"timeout_s = {ready_timeout}",
                "[patterns]",
                "verify_ms = 'Target verify[^0-9]*(?P<value>[0-9.]+) ?ms'",
                "[bench]",
                f"requests = {requests}",
                f"output_len = {output_len}",
                "input_len = 32",
                "warmup_requests = 0",
                "",
            ]
        )
        path = folder / f"{name}.toml"
        path.write_text(text)
        paths.append(path)
    return paths[0], paths[1]


def drop_env(names: list[str]) -> dict[str, str | None]:
    """bad_env that removes good's env vars (None = absent on the bad side)."""
    return dict.fromkeys(names)


def forget_records(sshd, names: list[str], sessions: list[Path] = ()) -> None:
    """Leave nothing behind, even after a failure: stop every server the sessions' journals launched
    and never stopped (by its recorded process group), then remove those records and `names`' from
    the box user's home (through the box, not our HOME)."""
    from specdebug.core.bisect.book import Book
    from specdebug.core.bisect.models import BisectOptions
    from specdebug.core.control.actions import stop_record
    from specdebug.core.control.records import forget_record, load_record
    from specdebug.core.journal import Journal
    from tests.boxes import ssh_box

    leftover = set()
    for session in sessions:
        leftover |= set(Book(BisectOptions(), None, ("", ""), "").load(Journal(session).records()).values())

    async def forget() -> None:
        remote = ssh_box(sshd.alias, ssh_config=sshd.config_path)
        await remote.start()
        try:
            await remote.wait_connected(15)
            for name in sorted(leftover | set(names)):
                record = await load_record(remote, name)
                if record is not None and record.stopped_at is None:
                    await stop_record(remote, record, grace_s=3)
                await forget_record(remote, name)
        finally:
            await remote.close()

    asyncio.run(forget())
