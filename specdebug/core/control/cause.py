"""A failed startup's one-line reason: the root cause among the failure's log lines.

Why apart from the tracker: which line names the cause is a rule of its own, tested on real logs.
Two things made the reason wrong before: servers wrap an error in their own words as it travels up
(a vLLM worker's `Unable to find address for: ib0` is followed by `WorkerProc initialization failed`,
`EngineCore failed to start`, `Engine core initialization failed. See root cause above`), and an
exception's message may go on over the next lines (pydantic's `1 validation error for ModelConfig`,
then `  Value error, User-specified max_model_len (4096) is greater than ...`).  So the reason is
the first error line that is not a wrapper, with the lines its message continues on.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from specdebug.engines.primitives import ANSI_RE, split_prefix

if TYPE_CHECKING:
    from specdebug.engines.pack import Pack

EXC_LINE_RE = re.compile(
    r"^(?:[A-Za-z_][\w.]*\.)?(?:[A-Za-z_]\w*)?(?:Error|Exception|Exit|Interrupt)(?::\s?.*)?$"
)
_SGLANG_PREFIX_RE = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[^\]]*\] ")
# lines that end an exception's message: a traceback's own lines, a Python warning, an empty line
_NOT_CONTINUATION = re.compile(
    r"^\s*(?:Traceback \(most recent call last\)|During handling of the above exception|"
    r"The above exception was the direct cause|File \"|\^+\s*$)|^\S+:\d+: \w*Warning: |^\s*$"
)
_PYDANTIC_NOISE = re.compile(r"^\s*For further information visit https://errors\.pydantic\.dev")
_PYDANTIC_TAIL = re.compile(r"\s\[type=[^\]]*\]\s*$")  # `[type=value_error, input_value=..., ...]`
MAX_CONTINUATION = 4  # lines
MAX_CONTINUATION_CHARS = 600


def split_line(line: str, pack: Pack | None) -> tuple[str, str]:
    """(head, message): the process tag and logger prefix, and the message as written (its leading
    blanks kept: they tell a traceback's frames and a message's continuation from a header)."""
    clean = ANSI_RE.sub("", line) if "\x1b" in line else line
    clean = clean.rstrip("\r\n")
    if pack is not None:
        start = split_prefix(clean).start
        return clean[:start], clean[start:]
    m = _SGLANG_PREFIX_RE.match(clean)
    return (clean[: m.end()], clean[m.end() :]) if m else ("", clean)


def is_exception_header(msg: str) -> bool:
    """`ValueError: ...` / `pydantic_core._pydantic_core.ValidationError: ...` at the message's start."""
    return not msg[:1].isspace() and EXC_LINE_RE.match(msg.strip()) is not None


def _is_error(msg: str, head: str, pack: Pack | None) -> bool:
    if is_exception_header(msg):
        return True
    if pack is None:
        return False
    level = split_prefix(head + msg).level
    return pack.message_error_kind(msg, level) is not None


def _is_wrapper(msg: str, pack: Pack | None) -> bool:
    if pack is not None:
        return pack.is_wrapper(msg)
    from specdebug.engines.pack import WRAPPER_COMMON

    return bool(WRAPPER_COMMON.search(msg))


def continuation(lines: Sequence[str], at: int, pack: Pack | None) -> list[str]:
    """The lines after the exception header at `at` that carry on its message: same process tag and
    logger prefix (vLLM repeats the record's prefix on each line; an uncaught traceback has none),
    until a traceback line, a warning, an empty line or another record."""
    head, _ = split_line(lines[at], pack)
    out: list[str] = []
    size = 0
    for line in lines[at + 1 : at + 1 + MAX_CONTINUATION + 1]:
        h, msg = split_line(line, pack)
        if h != head or _NOT_CONTINUATION.search(msg) or is_exception_header(msg):
            break
        if _PYDANTIC_NOISE.match(msg):
            continue
        text = _PYDANTIC_TAIL.sub("", msg.strip())
        if size + len(text) > MAX_CONTINUATION_CHARS:
            out.append(text[: max(0, MAX_CONTINUATION_CHARS - size)] + "…")
            break
        out.append(text)
        size += len(text)
        if len(out) >= MAX_CONTINUATION:
            break
    return out


def root_cause(lines: Sequence[str], pack: Pack | None) -> str | None:
    """The first error line among `lines` that is not a wrapper (a wrapper only when nothing else
    is there), with its message's continuation lines; None when no line is an error.

    One exception re-raised as another that quotes it (SGLang's `Exception: Capture cuda graph
    failed: {e}`) says the same and where: the later one is taken then."""
    first_wrapper: int | None = None
    for i, line in enumerate(lines):
        head, msg = split_line(line, pack)
        if not msg.strip() or not _is_error(msg, head, pack):
            continue
        if _is_wrapper(msg, pack):
            first_wrapper = i if first_wrapper is None else first_wrapper
            continue
        i = _quoted_later(lines, i, msg, pack)
        return _with_continuation(lines, i, split_line(lines[i], pack)[1], pack)
    if first_wrapper is None:
        return None
    return _with_continuation(lines, first_wrapper, split_line(lines[first_wrapper], pack)[1], pack)


def _quoted_later(lines: Sequence[str], at: int, msg: str, pack: Pack | None) -> int:
    """The index of a later exception line (not a wrapper) whose message quotes this one's, else `at`."""
    if not is_exception_header(msg):
        return at
    said = msg.strip().partition(": ")[2][:80]
    if len(said) < 12:  # too short to tell a quote from a coincidence
        return at
    for j in range(at + 1, len(lines)):
        _, later = split_line(lines[j], pack)
        if is_exception_header(later) and said in later and not _is_wrapper(later, pack):
            return j
    return at


def _with_continuation(lines: Sequence[str], at: int, msg: str, pack: Pack | None) -> str:
    text = msg.strip()
    if is_exception_header(msg):
        more = continuation(lines, at, pack)
        if more:
            text = f"{text.rstrip(':')}: {' '.join(more)}"
    return text
