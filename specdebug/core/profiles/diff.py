"""Knobs and profile diffs: one CLI flag or env var per knob (and the command prefix and working
directory: another worktree is another source), two profiles diffed into the knobs that differ,
as data a bisection can apply one at a time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field

from specdebug.core.fingerprint import PLUMBING_FLAGS
from specdebug.core.model import Model

if TYPE_CHECKING:
    from specdebug.core.profiles.model import Profile


class KnobValue(Model):
    """One CLI flag or env var of a profile; `tokens` are the flag's argv values (none for a switch)."""

    name: str
    kind: Literal["flag", "env", "command", "cwd"]
    value: str | None
    tokens: list[str] = Field(default_factory=list)
    switch: bool = False


class Knob(Model):
    """One difference between two profiles: a flag or env var with A's and B's value (None = absent).

    A boolean flag present shows as value "(set)" with `switch_*` true; `tokens_*` hold the argv
    values so a bisection can rebuild the command line exactly.
    """

    name: str
    kind: Literal["flag", "env", "command", "cwd"]
    value_a: str | None
    value_b: str | None
    tokens_a: list[str] | None = None
    tokens_b: list[str] | None = None
    switch_a: bool = False
    switch_b: bool = False

    def describe(self) -> str:
        return f"{self.name}: {_show(self.value_a)} -> {_show(self.value_b)}"


SWITCH_SHOWN = "(set)"


def _show(value: str | None) -> str:
    return "(absent)" if value is None else repr(value) if value != SWITCH_SHOWN else value


def diff_profiles(a: Profile, b: Profile, *, include_plumbing: bool = False) -> list[Knob]:
    """The knobs whose values differ between A and B: command, flags (A's order, then B's new), env.

    Plumbing flags (PLUMBING_FLAGS) are skipped unless asked for: they differ between any two
    profiles meant to run side by side and are never the cause of a performance difference.
    """

    def keep(k: KnobValue) -> bool:
        return include_plumbing or not (k.kind == "flag" and k.name in PLUMBING_FLAGS)

    ka = {(k.kind, k.name): k for k in a.knobs() if keep(k)}
    kb = {(k.kind, k.name): k for k in b.knobs() if keep(k)}
    keys = list(ka) + [k for k in kb if k not in ka]
    rank = {"command": 0, "cwd": 1, "flag": 2, "env": 3}
    keys.sort(key=lambda k: rank[k[0]])  # stable: keeps argv order within flags
    out: list[Knob] = []
    for key in keys:
        x, y = ka.get(key), kb.get(key)
        if x is not None and y is not None and x.tokens == y.tokens and x.value == y.value:
            continue
        out.append(
            Knob(
                name=key[1],
                kind=key[0],
                value_a=x.value if x else None,
                value_b=y.value if y else None,
                tokens_a=x.tokens if x else None,
                tokens_b=y.tokens if y else None,
                switch_a=bool(x and x.switch),
                switch_b=bool(y and y.switch),
            )
        )
    return out
