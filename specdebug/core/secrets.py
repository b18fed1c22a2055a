"""Masking of secret-looking values, shared by every place that shows or stores env/argv.

Why a module of its own: env dumps, launch records, exports and the TUI all carry environment
variables and command lines, and a token must never leak through any of them.  Masked values keep
a short fingerprint so two masked values can still be compared ("different") without showing them.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence

#: Substrings (case-insensitive) that make a variable or flag name secret.
SECRET_WORDS: tuple[str, ...] = ("TOKEN", "KEY", "SECRET", "PASSWORD", "PASS", "CREDENTIAL")

# Substring match, except the count/tool words that merely contain TOKEN or PASS (`--max-total-tokens`,
# `--tokenizer-path`, `SPECULATIVE_NUM_DRAFT_TOKENS`, `PASSTHROUGH`): masking those would hide the very
# knobs being debugged, while no real credential is named that way.
_SECRET_RE = re.compile(r"TOKEN(?!S|IZ)|KEY|SECRET|PASSWORD|PASS(?!THROUGH)|CREDENTIAL", re.IGNORECASE)
_MASKED_RE = re.compile(r"^<masked #[0-9a-f]{8}>$")
#: Secret values shorter than this are not scrubbed out of free text (too many false hits).
MIN_SCRUB_LEN = 4


def is_secret_name(name: str) -> bool:
    """True when a variable/flag name looks like it holds a secret (TOKEN, KEY, SECRET, ...)."""
    return bool(_SECRET_RE.search(name))


def fingerprint(value: str) -> str:
    """Short, stable digest of a value: equal values give equal fingerprints.

    8 hex digits of SHA-256 with a domain prefix: enough to tell values apart, too short to
    be a useful lookup key for high-entropy tokens.
    """
    return hashlib.sha256(b"specdebug-secret-v1\0" + value.encode("utf-8", "surrogateescape")).hexdigest()[:8]


def mask(value: str) -> str:
    """The masked form of a secret value: `<masked #1a2b3c4d>`."""
    return f"<masked #{fingerprint(value)}>"


def is_masked(text: str) -> bool:
    """True when text is already the output of `mask` (so it is not masked twice)."""
    return bool(_MASKED_RE.match(text))


def mask_value(name: str, value: str | None) -> str | None:
    """Value as it may be shown: masked when the name is secret, unchanged otherwise."""
    if value is None or not is_secret_name(name) or is_masked(value):
        return value
    return mask(value)


def mask_env(env: Mapping[str, str]) -> dict[str, str]:
    """Copy of env with secret-named values masked (for journal, exports, JSON, TUI)."""
    return {k: mask_value(k, v) or "" for k, v in env.items()}


def same_value(a: str | None, b: str | None) -> bool:
    """Compare two values that may each be raw or masked, by fingerprint when either is masked."""
    if a is None or b is None:
        return a is b
    if is_masked(a) or is_masked(b):
        fa = a if is_masked(a) else mask(a)
        fb = b if is_masked(b) else mask(b)
        return fa == fb
    return a == b


def _flag_name(arg: str) -> str | None:
    if arg.startswith("-") and len(arg) > 1 and not arg[1:2].isdigit():
        return arg.lstrip("-").split("=", 1)[0]
    return None


def mask_argv(argv: Sequence[str]) -> list[str]:
    """Mask values of secret-named flags in a command line (`--api-key X`, `--hf-token=X`, `TOKEN=x cmd`)."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            hide_next = False
            if _flag_name(arg) is None:
                out.append(mask(arg))
                continue
        flag = _flag_name(arg)
        if flag is not None and is_secret_name(flag):
            if "=" in arg:
                head, val = arg.split("=", 1)
                out.append(f"{head}={mask(val)}")
            else:
                out.append(arg)
                hide_next = True
            continue
        if flag is None and "=" in arg and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", arg):
            name, val = arg.split("=", 1)
            out.append(f"{name}={mask_value(name, val)}")
            continue
        out.append(arg)
    return out


def secret_values(env: Mapping[str, str]) -> set[str]:
    """The raw values of secret-named variables (to scrub them from free text later)."""
    return {v for k, v in env.items() if is_secret_name(k) and len(v) >= MIN_SCRUB_LEN and not is_masked(v)}


def scrub(text: str, values: Iterable[str]) -> str:
    """Replace every occurrence of the given secret values in free text by their masked form.

    Belt and braces for text that is not name=value shaped (log lines, titles, error messages).
    """
    for v in sorted({v for v in values if len(v) >= MIN_SCRUB_LEN}, key=len, reverse=True):
        if v in text:
            text = text.replace(v, mask(v))
    return text
