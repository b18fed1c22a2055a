"""§5/§6: the follower's record framing survives any line content and any path (newlines, tabs,
non-UTF-8 bytes, a leading '!'), and lines are cut at a fixed length with their true length kept.
Property tests run the real box agent as a local process (the framing is the same over SSH);
the sshd tests cover a newline in a remote path end to end."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specdebug.core.limits import MAX_LINE
from specdebug.core.logs.agent import agent_argv
from specdebug.core.logs.events import LogEvent
from specdebug.core.logs.follow import Follower, RawLine
from specdebug.core.logs.scan import LineSplitter

SETTINGS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
content = st.lists(
    st.sampled_from([b"a", b"k", b"\n", b"\xff", b"\t", b"\r", b"\0", b"!", b"T1 2\t"]), max_size=80
)


def expected(data: bytes, limit: int, want: bytes | None = None) -> list[tuple[int, bytes, int | None]]:
    out, off = [], 0
    parts = data.split(b"\n")
    if parts and parts[-1] == b"":
        parts.pop()
    for line in parts:
        head = line[:limit]
        if want is None or want in head:
            out.append((off, head, len(line) if len(line) > limit else None))
        off += len(line) + 1
    return out


def run_agent(path: Path, prefilter: list[str] = (), limit: int | None = None) -> Follower:
    """The agent once over `path`; its stdout decoded by a Follower exactly as from SSH."""
    argv = agent_argv(str(path), 0, None, list(prefilter), True)
    if limit is not None:
        # the client passes its line limit as the first argument of the agent's entry point
        assert f"\nrun({MAX_LINE!r}, " in argv[4]
        argv[4] = argv[4].replace(f"\nrun({MAX_LINE!r}, ", f"\nrun({limit!r}, ")
    out = subprocess.run(argv, capture_output=True, timeout=60).stdout
    follower = Follower(None, str(path), offset=0)  # type: ignore[arg-type]
    recs = out.split(b"\n")
    assert recs.pop() == b""  # every record ends with a newline
    follower.items = follower._records(recs)  # type: ignore[attr-defined]
    return follower


def raw_lines(follower) -> list[tuple[int, bytes, int | None]]:
    return [(x.offset, x.data, x.truncated) for x in follower.items if isinstance(x, RawLine)]


@given(chunks=st.lists(st.binary(max_size=40), max_size=12), limit=st.integers(1, 12))
def test_line_splitter_caps_and_keeps_offsets(chunks: list[bytes], limit: int) -> None:
    split = LineSplitter(limit)
    got = [item for c in chunks for item in split.feed(c)] + list(split.end())
    data = b"".join(chunks)
    want = expected(data if data.endswith(b"\n") or not data else data + b"\n", limit)
    assert got == want


@SETTINGS
@given(parts=content, limit=st.integers(1, 9), select=st.booleans())
def test_agent_framing_any_bytes(tmp_path: Path, parts: list[bytes], limit: int, select: bool) -> None:
    data = b"".join(parts)
    path = tmp_path / "a.log"
    path.write_bytes(data)
    f = run_agent(path, ["k"] if select else [], limit=limit)
    full = data if data.endswith(b"\n") or not data else data + b"\n"
    assert raw_lines(f) == expected(full, limit, b"k" if select else None)
    assert not [x for x in f.items if isinstance(x, LogEvent) and x.kind == "error"]


names = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="/\0"), min_size=1, max_size=40
).filter(lambda s: s not in (".", "..") and len(s.encode()) < 200)


@SETTINGS
@given(name=names)
def test_agent_framing_any_path(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(b"x\n")
    try:
        f = run_agent(path)
        assert f.resolved_path == os.path.abspath(path)
        assert raw_lines(f) == [(0, b"x", None)]
    finally:
        path.unlink()


async def test_newline_and_tab_in_a_remote_path(remote, tmp_path: Path) -> None:
    path = tmp_path / "odd\nname\twith !tabs"
    path.write_bytes(b"first\n\xff\x1b[31mred\nlast")
    follower = Follower(remote, str(path), offset=0, once=True)
    items = [x async for x in follower.lines()]
    assert follower.resolved_path == str(path)
    assert [(x.offset, x.data) for x in items if isinstance(x, RawLine)] == [
        (0, b"first"),
        (6, b"\xff\x1b[31mred"),
        (16, b"last"),
    ]
    assert [x.kind for x in items if isinstance(x, LogEvent)] == ["opened", "ended"]
