"""From two profiles to what bisection moves: knobs (the profile diff), units (--group), candidates.

A candidate is the good profile with some units set to the bad side's values.  It gets its own
name (the good profile's name, the bisection that launched it, its fingerprint: what `status` and
the Startup pane show, so a server left behind says whose it is) and its own log file, so its server record and
its results never collide with the ends; it keeps the good profile's port, so at most one server of
the bisection runs at a time on it.
"""

from __future__ import annotations

import fnmatch
from pathlib import PurePosixPath

from specdebug.core.bisect.models import BisectOptions, KnobRow, Settings, Unit
from specdebug.core.bisect.nodeknobs import config_fingerprint, node_knobs, split_name, with_node_knobs
from specdebug.core.profiles import Knob, Profile, diff_profiles
from specdebug.errors import SpecdebugError

NAME_SUFFIX = ".bx-"  # <good name>.bx-<bisection>-<fingerprint>: a candidate's profile (and record) name


def settings_for(good: Profile, options: BisectOptions) -> Settings:
    b = good.bench
    return Settings(
        requests=options.requests or b.requests,
        output_len=options.output_len or b.output_len,
        concurrency=options.concurrency or b.concurrency,
        input_len=options.input_len or b.input_len,
    )


class GroupError(ValueError, SpecdebugError):
    """A --group that matches no knob (usage error)."""

    exit_code = 2


def knob_rows(knobs: list[Knob], units: list[Unit]) -> list[KnobRow]:
    unit_of = {k: u.name for u in units for k in u.knobs}
    return [
        KnobRow(name=k.name, kind=k.kind, good=k.value_a, bad=k.value_b, unit=unit_of.get(k.name, k.name))
        for k in knobs
    ]


def make_units(knobs: list[Knob], groups: list[str]) -> list[Unit]:
    """One unit per knob, except knobs matching a --group glob, which move together (first glob wins)."""
    units: list[Unit] = []
    by_glob: dict[str, Unit] = {}
    for glob in groups:
        if not any(fnmatch.fnmatchcase(k.name, glob) for k in knobs):
            raise GroupError(f"--group {glob!r} matches no knob (knobs: {', '.join(k.name for k in knobs)})")
    for knob in knobs:
        first = next((g for g in groups if fnmatch.fnmatchcase(knob.name, g)), None)
        if first is None:
            units.append(Unit(name=knob.name, knobs=[knob.name]))
        elif first in by_glob:
            by_glob[first].knobs.append(knob.name)
        else:
            by_glob[first] = Unit(name=first, knobs=[knob.name])
            units.append(by_glob[first])
    return units


class Candidates:
    """Builds the config for a set of units, with its name and fingerprint."""

    def __init__(self, good: Profile, bad: Profile, groups: list[str] | None = None) -> None:
        self.good, self.bad = good, bad
        self.knobs = diff_profiles(good, bad) + node_knobs(good, bad)  # a deployment's per-node ones too
        self.units = make_units(self.knobs, list(groups or []))
        self.rows = knob_rows(self.knobs, self.units)
        self.good_fp, self.bad_fp = config_fingerprint(good), config_fingerprint(bad)
        self._by_name = {k.name: k for k in self.knobs}
        self.tag = ""  # the bisection's id, set by the engine: part of every candidate's name

    def knob_names(self, units: frozenset[int]) -> list[str]:
        return [name for i in sorted(units) for name in self.units[i].knobs]

    def profile(self, units: frozenset[int]) -> tuple[Profile, str]:
        """(profile to launch, fingerprint): the ends themselves when the set is empty or all."""
        chosen = [self._by_name[n] for n in self.knob_names(units)]
        per_node = [k for k in chosen if split_name(k.name) is not None]
        cand = with_node_knobs(self.good.with_knobs([k for k in chosen if k not in per_node]), per_node)
        fp = config_fingerprint(cand)
        if fp == self.good_fp:
            return self.good, fp
        if fp == self.bad_fp:
            return self.bad, fp
        name = f"{self.good.name}{NAME_SUFFIX}{self.tag[:6] + '-' if self.tag else ''}{fp[:8]}"
        log = str(PurePosixPath(self.good.server.log_file).with_name(f"{name}.log"))
        server = cand.server.model_copy(update={"log_file": log})
        return cand.model_copy(update={"name": name, "server": server}), fp

    def fingerprint_of(self, applied: list[str]) -> str | None:
        """The fingerprint of the candidate with exactly these knobs applied (None: no such candidate)."""
        units = frozenset(i for i, u in enumerate(self.units) if set(u.knobs) <= set(applied))
        if set(self.knob_names(units)) != set(applied):
            return None
        return self.profile(units)[1]
