"""The vocabulary of env rules: what a server does to its workers' environment, as an `Effect`.

Why a rule table: an env check that says "the server replaced your value" must be right about the
server.  Each engine module (engines.sglang, engines.vllm) resolves its rules, for one server
(version, argv), to an `EnvRule` whose effect is one of:

  overwrites  the user's value never reaches the workers (the server sets its own)
  default     the server sets a value only when the user did not export one (an exported value is kept)
  maybe       the version decides and is unknown: an exported value may or may not have been kept

Version boundaries marked "approximate" are not pinned to a release by the sources we have; versions
compare numerically on their leading digits ("0.5.4.post1" -> (0, 5, 4)).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Effect = Literal["overwrites", "default", "maybe"]


@dataclass(frozen=True)
class EnvRule:
    """One variable the server sets for itself, resolved for one server."""

    name: str
    effect: Effect
    value: str | None  # what the server sets (None: depends)
    note: str  # one sentence for the user, naming the source and version

    @property
    def overwrites(self) -> bool:
        return self.effect == "overwrites"


def parse_version(text: str | None) -> tuple[int, ...] | None:
    """'0.5.4.post1' -> (0, 5, 4); 'v0.11.0rc2' -> (0, 11, 0); None when no digits lead."""
    if not text:
        return None
    m = re.match(r"v?(\d+(?:\.\d+)*)", text.strip())
    return tuple(int(x) for x in m.group(1).split(".")) if m else None


def has_flag(argv: Sequence[str], flag: str) -> bool:
    return any(a == flag or a.startswith(flag + "=") for a in argv)
