"""Server profiles: one TOML file says how to start a server, when it is ready, how to benchmark it.

Profiles are compared more than they are edited: "2 steps with the NCCL env" vs "3 steps
without".  So besides loading and validating, this package turns a profile into *knobs* (one
CLI flag or one env var each) and diffs two profiles into the knobs that differ, as data a
bisection can apply one at a time.

Errors are for humans fixing a file: every `ProfileError` names the file, the line and the
field, in one line (`path:line: field: what is wrong`).  `extends` chains are resolved here
(relative to the extending file; later keys override, tables merge), so the line reported is
the one in the file that actually set the offending value.

Layout: model (the pydantic models), load (TOML, extends, error translation), lines (key -> line
lookup), diff (knobs and diffs).  The names below are the package's public surface.
"""

from __future__ import annotations

from specdebug.core.fingerprint import PLUMBING_FLAGS, config_fingerprint, split_argv
from specdebug.core.profiles.diff import SWITCH_SHOWN, Knob, KnobValue, diff_profiles
from specdebug.core.profiles.lines import find_key_line
from specdebug.core.profiles.load import MAX_DEPTH, load_profile, load_profile_text
from specdebug.core.profiles.model import (
    DEFAULT_PORTS,
    BenchSpec,
    Kind,
    Profile,
    ProfileError,
    ReadySpec,
    ServerSpec,
    WorkersSpec,
    profile_schema,
)

__all__ = [
    "DEFAULT_PORTS",
    "MAX_DEPTH",
    "PLUMBING_FLAGS",
    "SWITCH_SHOWN",
    "BenchSpec",
    "Kind",
    "Knob",
    "KnobValue",
    "Profile",
    "ProfileError",
    "ReadySpec",
    "ServerSpec",
    "WorkersSpec",
    "config_fingerprint",
    "diff_profiles",
    "find_key_line",
    "load_profile",
    "load_profile_text",
    "profile_schema",
    "split_argv",
]
