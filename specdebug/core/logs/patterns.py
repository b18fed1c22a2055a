"""Pattern packs for SGLang and vLLM logs: batch/stats lines, milestones, ready and error lines.

Why key/value tails instead of one regex per line shape: both servers keep adding, removing and
reordering fields ("accept rate" appeared mid-2025, PD servers add four more, vLLM renamed its spec
line three times). We anchor on the line's head ("Decode batch", "SpecDecoding metrics: ") and split
the rest on ", " into `key: value` pairs; every pair lands in `fields` under a normalised key, and a
small per-pack map picks the metrics. A new field therefore never breaks the old ones.

Milestone, ready and error patterns are plain data (`Pack.milestones`, `Pack.errors`) so the startup
watcher can reuse them; `Pack.phase_of`, `is_ready`, `is_error`, `error_kind` are the pure helpers.
Formats: shared/formats/serving-formats.md (SGLang 1.1-1.4, vLLM 2.1-2.4, NCCL 4.2).

Layout: `primitives` (line primitives), `engine` (the Pack type and its helpers), `packs.sglang` and
`packs.vllm` (the data).  This module is the registry (PACKS), the auto detection, and re-exports
the names callers use.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from specdebug.core.logs.engine import ERR_COMMON, GENERIC_EXC, Pack
from specdebug.core.logs.packs.sglang import SGLANG
from specdebug.core.logs.packs.vllm import VLLM
from specdebug.core.logs.primitives import (
    ANSI_RE,
    NCCL_ENV_RE,
    NUM_RE,
    SGLANG_DICT_PREFIX_RE,
    SGLANG_PREFIX_RE,
    VLLM_PREFIX_RE,
    WRAPPER_RE,
    Parsed,
    Prefix,
    norm_key,
    parse_kv_tail,
    parse_nccl_env_line,
    parse_value,
    split_prefix,
)

__all__ = [
    "ANSI_RE",
    "DECIDE_MARGIN",
    "ERR_COMMON",
    "GENERIC_EXC",
    "NCCL_ENV_RE",
    "NUM_RE",
    "PACKS",
    "PACK_NAMES",
    "SGLANG",
    "SGLANG_DICT_PREFIX_RE",
    "SGLANG_PREFIX_RE",
    "VLLM",
    "VLLM_PREFIX_RE",
    "WRAPPER_RE",
    "Pack",
    "PackDetector",
    "Parsed",
    "Prefix",
    "detect_pack",
    "detect_scores",
    "get_pack",
    "norm_key",
    "parse_kv_tail",
    "parse_nccl_env_line",
    "parse_value",
    "split_prefix",
]


PACKS: dict[str, Pack] = {"sglang": SGLANG, "vllm": VLLM}
PACK_NAMES = ("auto", *PACKS)

# evidence for auto detection: (pack, weight, regex)
_DETECT = (
    (
        "sglang",
        3,
        re.compile(
            r"(?:Decode|Prefill) batch[ .,\[(]|server_args=(?:ServerArgs\(|\{)|fired up and ready to roll"
        ),
    ),
    ("sglang", 2, re.compile(r"sglang::|sglang\.srt|^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?: [A-Z]+\d+)+\] ")),
    ("sglang", 1, re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] |sglang")),
    (
        "vllm",
        3,
        re.compile(
            r"SpecDecoding metrics|Speculative metrics|Avg prompt throughput|vLLM (?:API )?server version"
        ),
    ),
    (
        "vllm",
        2,
        re.compile(r"\((?:APIServer|EngineCore\w*|Worker\w*|VllmWorker\w*) (?:rank=\d+ )?pid=\d+\)|VLLM::"),
    ),
    ("vllm", 1, re.compile(r"^(?:DEBUG|INFO|WARNING|ERROR) \d\d-\d\d \d\d:\d\d:\d\d |vLLM|vllm")),
)
DECIDE_MARGIN = 3


def detect_scores(line: str) -> dict[str, int]:
    """Evidence one line gives for each pack (summed over lines by `PackDetector`)."""
    scores = {"sglang": 0, "vllm": 0}
    wrapper = WRAPPER_RE.match(line) if line[:1] in "(" or "|" in line[:40] else None
    clean = line[wrapper.end() :] if wrapper else line
    for name, weight, rx in _DETECT:
        if rx.search(clean):
            scores[name] += weight
    return scores


class PackDetector:
    """Accumulates evidence line by line; `decided` once one pack leads by DECIDE_MARGIN."""

    def __init__(self) -> None:
        self.scores = {"sglang": 0, "vllm": 0}
        self.decided: str | None = None

    def feed(self, line: str) -> str | None:
        if self.decided:
            return self.decided
        for k, v in detect_scores(line).items():
            self.scores[k] += v
        s, v = self.scores["sglang"], self.scores["vllm"]
        if s - v >= DECIDE_MARGIN:
            self.decided = "sglang"
        elif v - s >= DECIDE_MARGIN:
            self.decided = "vllm"
        return self.decided

    def best(self) -> str | None:
        """The decided pack, else whichever has more evidence, else None."""
        if self.decided:
            return self.decided
        s, v = self.scores["sglang"], self.scores["vllm"]
        return None if s == v else ("sglang" if s > v else "vllm")


def detect_pack(lines: Iterable[str]) -> str | None:
    """'sglang', 'vllm' or None (no evidence) for a sample of lines."""
    det = PackDetector()
    for line in lines:
        if det.feed(line):
            break
    return det.best()


def get_pack(name: str) -> Pack:
    try:
        return PACKS[name]
    except KeyError:
        raise ValueError(f"unknown pattern pack {name!r} (choose from {', '.join(PACK_NAMES)})") from None
