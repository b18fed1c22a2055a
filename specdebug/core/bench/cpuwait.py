"""How much the CPU was contended over a benchmark's run, on the box and on this machine.

A server starved of CPU (another user's job on the box) decodes slower, and a client starved of CPU
(a busy laptop running the built-in benchmark) reads its stream late — slow, or fast where its
first token was read late and the rest came at once: either moves a figure for a reason that is not
the profile.  Linux's CPU pressure (`/proc/pressure/cpu`, "some" line) counts the microseconds in
which some runnable task waited for a CPU; its growth over the run's wall time is the share named here
(on every node of a deployment: a starved node holds the others back).  Where the file is absent (not Linux, PSI off) nothing is
claimed: the share is None and no warning is given.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from specdebug.remote.api import Remote, RemoteError

PSI_CPU = "/proc/pressure/cpu"
CONTENDED = 0.10  # above this share of the run, some task waited for a CPU: the figure may be off


@dataclass(frozen=True)
class Pressure:
    """One reading: the cumulative "some" stall (microseconds) at an instant of this machine's
    monotonic clock (a box's reading is timed when its answer came: the run is long beside that)."""

    stall_us: int
    at: float


def parse_some_total(text: str) -> int | None:
    """The `total=` of the "some" line of a PSI file, or None when the text is not one."""
    for line in text.splitlines():
        fields = line.split()
        if not fields or fields[0] != "some":
            continue
        for field in fields[1:]:
            key, _, value = field.partition("=")
            if key == "total" and value.isdigit():
                return int(value)
    return None


def local_reading() -> Pressure | None:
    """This machine's CPU pressure now (None without PSI)."""
    try:
        with open(PSI_CPU, encoding="ascii", errors="replace") as f:
            total = parse_some_total(f.read(4096))
    except OSError:
        return None
    return None if total is None else Pressure(total, time.monotonic())


async def box_reading(remote: Remote) -> Pressure | None:
    """The box's CPU pressure now (None without PSI, or when the box cannot be read)."""
    try:
        files = await remote.read_files([PSI_CPU])
    except RemoteError:
        return None
    data = files[0].data if files else None
    total = parse_some_total(data.decode("ascii", "replace")) if data else None
    return None if total is None else Pressure(total, time.monotonic())


async def box_readings(remotes: list[Remote]) -> list[Pressure | None]:
    """Every box's CPU pressure now, in order (a deployment's nodes: the leader first)."""
    return list(await asyncio.gather(*(box_reading(r) for r in remotes)))


def worst(shares: list[float | None]) -> float | None:
    """The most contended of several boxes' shares (None: none was measured)."""
    known = [s for s in shares if s is not None]
    return max(known) if known else None


def share(before: Pressure | None, after: Pressure | None) -> float | None:
    """The share of the wall time between two readings in which some task waited for a CPU."""
    if before is None or after is None or after.at <= before.at or after.stall_us < before.stall_us:
        return None
    return min(1.0, (after.stall_us - before.stall_us) / 1e6 / (after.at - before.at))


CLIENT = "this machine (the benchmark client)"
SERVER_EFFECT = "the server may have run slower than it can"
CLIENT_EFFECT = "the client's timings may be off"


def _said(where: str, spread: str, effect: str, during: str = "the run", of: str = "of the time") -> str:
    return (
        f"CPU contended on {where} during {during}: some task waited for a CPU {spread} {of}"
        f" (Linux CPU pressure); {effect}"
    )


def warnings(box: float | None, client: float | None, host: str) -> list[str]:
    """A warning for each side whose CPU was contended over the run, with the figure and its source."""
    out: list[str] = []
    if box is not None and box >= CONTENDED:
        out.append(_said(host, f"{box:.0%}", SERVER_EFFECT))
    if client is not None and client >= CONTENDED:
        out.append(
            _said(CLIENT, f"{client:.0%}", CLIENT_EFFECT + " (a starved client reads the stream late)")
        )
    return out


def over_runs(box: list[float | None], client: list[float | None], host: str) -> list[str]:
    """One warning per side for many runs (a bisection's launches): how many of the runs measured were
    contended, and how much; nothing where none was (or nothing was measured)."""
    out: list[str] = []
    for shares, where, effect in ((box, host, SERVER_EFFECT), (client, CLIENT, CLIENT_EFFECT)):
        known = [s for s in shares if s is not None]
        hot = sorted(s for s in known if s >= CONTENDED)
        if not hot:
            continue
        spread = f"{hot[0]:.0%}" if len(hot) == 1 else f"{hot[0]:.0%} to {hot[-1]:.0%}"
        during = f"{len(hot)} of {len(known)} benchmark runs"
        out.append(
            _said(where, spread, effect + ": readings of those runs may be off, and so may a verdict that rests on them",
                  during, "of the run")
        )  # fmt: skip
    return out
