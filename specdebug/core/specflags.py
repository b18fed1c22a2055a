"""The live server's speculative settings against the profile's launch flags: one finding per mismatch.

Why apart from core.metrics: /metrics gives the rates; this compares two of its gauges (the settings
an engine exports, `PromNames.settings`, e.g. SGLang 0.5.23's spec_num_steps) with the flags the
profile launches with, so `metrics` can say "the server runs 3 draft tokens but the profile asks 4",
and `scan` can read the draft tokens for specdebug's own accept rate.
"""

from __future__ import annotations

from specdebug.core.metrics import PromRates
from specdebug.engines import ENGINES

# live speculative settings some engine exports as gauges: PromRates field -> (label, launch flag)
_SETTINGS = {field: (label, flag) for e in ENGINES.values() for field, label, flag in e.prom.settings}


def profile_spec_flags(argv: list[str]) -> tuple[int | None, int | None]:
    """(speculative steps, draft tokens) a launch argv sets through the flags the engines' live
    settings mirror (`PromNames.settings`; None: not given)."""
    from specdebug.core.fingerprint import split_argv

    wanted = {flag for _, flag in _SETTINGS.values()}
    found: dict[str, int] = {}
    for name, values in split_argv(argv)[1]:
        if name in wanted and len(values) == 1:
            if values[0].isdigit():
                found[name] = int(values[0])

    def given(field: str) -> int | None:
        setting = _SETTINGS.get(field)
        return found.get(setting[1]) if setting is not None else None

    return given("num_steps"), given("num_draft_tokens")


def spec_mismatches(r: PromRates, steps: int | None, draft_tokens: int | None) -> list[str]:
    """Findings: the live server's speculative gauges against the profile's flags (None: not set)."""
    out = []
    for field, want in (("num_steps", steps), ("num_draft_tokens", draft_tokens)):
        if field not in _SETTINGS:
            continue
        label, flag = _SETTINGS[field]
        live = getattr(r, field)
        if live is not None and want is not None and round(live) != want:
            out.append(f"the server runs {round(live)} {label} but the profile's {flag} is {want}")
    return out
