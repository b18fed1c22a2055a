"""Masking of secrets, shared by every place that shows or stores env, argv or text from the box.

Why a module of its own: env dumps, launch records, exports, log lines and the TUI all carry
environment variables, command lines and free text, and a token must never leak through any of
them.  Masked values keep a short fingerprint so two masked values can still be compared
("different") without showing them.

Three layers:
* by name: a variable or flag whose name looks secret (TOKEN, KEY, PASSWORD, AUTH, ...);
* by shape: credentials inside URLs (``scheme://user:PASS@``), ``Bearer``/``Basic`` values,
  ``Authorization`` headers and ``name=value`` / ``--flag value`` pairs with a secret name inside
  free text (SGLang logs ``server_args=ServerArgs(... api_key='sk-...')``);
* by value: every secret value known from the profile (and every value the shape rules found) is
  scrubbed wherever it shows up again in log text (`Scrubber`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from specdebug.core.profiles import Profile

#: Substrings (case-insensitive) that make a variable or flag name secret.
SECRET_WORDS: tuple[str, ...] = (
    "TOKEN",
    "KEY",
    "SECRET",
    "PASSWORD",
    "PASS",
    "CREDENTIAL",
    "AUTH",
    "PRIVATE",
    "COOKIE",
    "SESSION",
)

# Substring match, except the count/tool words that merely contain TOKEN, PASS or AUTH
# (`--max-total-tokens`, `--tokenizer-path`, `SPECULATIVE_NUM_DRAFT_TOKENS`, `PASSTHROUGH`,
# `GIT_AUTHOR_NAME`): masking those would hide the very knobs being debugged, while no real
# credential is named that way.
_SECRET_RE = re.compile(
    r"TOKEN(?!S|IZ)|KEY|SECRET|PASSWORD|PASS(?!THROUGH)|CREDENTIAL|AUTH(?!OR(?!I[SZ]))|PRIVATE|COOKIE|SESSION",
    re.IGNORECASE,
)
_MASKED_RE = re.compile(r"^<masked #[0-9a-f]{8}>$")
_MASKED = r"<masked #[0-9a-f]{8}>"
#: Secret values shorter than this are not scrubbed out of free text (too many false hits).
MIN_SCRUB_LEN = 4
#: A scrubber remembers at most this many values it found in text (a hostile log stays bounded).
MAX_LEARNED = 256


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
    """Value as it may be shown: masked whole when the name is secret, else with the credentials
    inside it masked (`DATABASE_URL=postgres://admin:PASS@db/x`, `--header=Bearer x`)."""
    if value is None or is_masked(value):
        return value
    if is_secret_name(name):
        return mask(value)
    return mask_text(value)


def mask_env(env: Mapping[str, str], known: Iterable[str] = ()) -> dict[str, str]:
    """Copy of env with secret values masked (for journal, exports, JSON, TUI, the state file);
    `known` secret values (a profile's) are scrubbed out of every value too."""
    ordered = _by_length(known)
    return {k: _replace_values(mask_value(k, v) or "", ordered) for k, v in env.items()}


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


def _argv_secrets(argv: Sequence[str]) -> list[tuple[int, str]]:
    """(index, raw value) of every argument that holds a secret by name (flag value or NAME=value)."""
    out: list[tuple[int, str]] = []
    hide_next = False
    for i, arg in enumerate(argv):
        flag = _flag_name(arg)
        if hide_next:
            hide_next = False
            if flag is None:
                out.append((i, arg))
                continue
        if flag is not None and is_secret_name(flag):
            if "=" in arg:
                out.append((i, arg.split("=", 1)[1]))
            else:
                hide_next = True
        elif flag is None and _ASSIGN_ARG_RE.match(arg) and is_secret_name(arg.split("=", 1)[0]):
            out.append((i, arg.split("=", 1)[1]))
    return out


_ASSIGN_ARG_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def mask_argv(argv: Sequence[str], known: Iterable[str] = ()) -> list[str]:
    """Mask a command line: values of secret-named flags (`--api-key X`, `--hf-token=X`, `TOKEN=x cmd`),
    credentials inside any argument (URLs with a password, bearer values) and `known` secret values
    (a profile's: its env secrets passed positionally, say) wherever they appear."""
    ordered = _by_length(known)
    out = [mask_text(_replace_values(a, ordered)) for a in argv]
    for i, value in _argv_secrets(argv):
        if is_masked(value) or is_masked(out[i]):
            continue
        arg = argv[i]
        out[i] = mask(value) if arg == value else f"{arg[: len(arg) - len(value)]}{mask(value)}"
    return out


def profile_secrets(profile: Profile | None) -> set[str]:
    """The secret values a profile knows: its server env (by name and inside values) and argv."""
    if profile is None:
        return set()
    return secret_values(dict(profile.server.env)) | argv_secret_values(list(profile.server.argv))


def secret_values(env: Mapping[str, str]) -> set[str]:
    """The raw secrets of an env: values of secret-named variables and credentials inside values
    (to scrub them from free text later)."""
    out = {v for k, v in env.items() if is_secret_name(k) and not is_masked(v)}
    for v in env.values():
        out |= find_secrets(v)
    return {v for v in out if len(v) >= MIN_SCRUB_LEN}


def argv_secret_values(argv: Sequence[str]) -> set[str]:
    """The raw secrets of a command line (values of secret-named flags, credentials inside args)."""
    out = {v for _, v in _argv_secrets(argv) if not is_masked(v)}
    for a in argv:
        out |= find_secrets(a)
    return {v for v in out if len(v) >= MIN_SCRUB_LEN}


def scrub(text: str, values: Iterable[str]) -> str:
    """Free text with every known secret value replaced by its masked form, then the shape rules
    (URL credentials, bearer values, secret name=value pairs) applied."""
    return mask_text(_replace_values(text, _by_length(values)))


def _by_length(values: Iterable[str]) -> list[str]:
    return sorted({v for v in values if len(v) >= MIN_SCRUB_LEN and not is_masked(v)}, key=len, reverse=True)


def _replace_values(text: str, ordered: Sequence[str]) -> str:
    for v in ordered:
        if v in text:
            text = text.replace(v, mask(v))
    return text


# -- shape rules: secrets recognisable in free text without knowing them -------------------------

_VALUE = rf"{_MASKED}|'[^'\n]{{0,4096}}'|\"[^\"\n]{{0,4096}}\""
# scheme://user:PASSWORD@host -- the password runs to the last '@' before the path
_URL_RE = re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]{0,31}://[^:/?#@\s]{0,256}:(?P<val>[^/\s]{1,1024})@")
_AUTHZ_RE = re.compile(
    r"\b(?:proxy-)?authorization[\"']?[ \t]*[:=][ \t]*[\"']?(?:(?:bearer|basic|token|digest|negotiate)[ \t]+)?"
    rf"(?P<val>{_MASKED}|[^\s\"',;]{{1,4096}})",
    re.IGNORECASE,
)
_BEARER_RE = re.compile(r"\b(?:[Bb]earer|BEARER)[ \t]+(?P<val>[A-Za-z0-9\-._~+/]{8,4096}=*)")
_BASIC_RE = re.compile(r"\b(?:[Bb]asic|BASIC)[ \t]+(?P<val>[A-Za-z0-9+/]{6,4096}={0,2})(?![\w+/=])")
# A name holding a secret word: only such names may match (a non-secret `x='...` match would
# consume the text after it, hiding a secret pair that follows from the search).
_SECRET_NAME = rf"(?=[\w.\-]{{0,63}}?(?i:{_SECRET_RE.pattern}))"
# name=value (ServerArgs repr, env dumps, query strings) and "name": value (JSON, dict reprs)
_ASSIGN_RE = re.compile(
    rf"(?<![\w.]){_SECRET_NAME}(?P<name>[A-Za-z_][\w.\-]{{0,63}})[ \t]*=[ \t]*"
    rf"(?P<val>{_VALUE}|[^\s,;)\]}}'\"]{{1,4096}})"
)
_KEYED_RE = re.compile(
    rf"(?P<q>[\"']){_SECRET_NAME}(?P<name>[A-Za-z_][\w.\-]{{0,63}})(?P=q)[ \t]*:[ \t]*"
    rf"(?P<val>{_VALUE}|[^\s,;)\]}}'\"]{{1,4096}})"
)
# --flag value (a command line written into a log)
_FLAG_RE = re.compile(
    rf"(?<!\S)--{_SECRET_NAME}(?P<name>[A-Za-z][\w\-]{{0,63}})[ \t]+(?P<val>{_VALUE}|[^\s'\"\-]\S{{0,4095}})"
)
_NOT_SECRET = {"", "none", "null", "true", "false", "***", "nil", "undefined"}
_NUMBER_RE = re.compile(r"^[+-]?\d+(\.\d+)?$")


def _triggers(text: str) -> bool:
    """Cheap test before the regexes: most log lines (batch stats) hold none of these.  A word is
    searched at ~2 ns a character, one character at memchr speed: the upper-case words only where
    their rare capital is there at all (grep's runs pass here, issue 43)."""
    return (
        "=" in text
        or "--" in text
        or "://" in text
        or '"' in text
        or "'" in text
        or "earer" in text
        or ("R" in text and "EARER" in text)
        or "asic" in text
        or ("C" in text and "ASIC" in text)
    )


may_hold_secrets = _triggers  # False: the shape rules find nothing in the text (mask_text returns it)


def _unquote(val: str) -> tuple[str, str]:
    """(quote, inner) of a matched value."""
    if len(val) >= 2 and val[0] == val[-1] and val[0] in "'\"":
        return val[0], val[1:-1]
    return "", val


def _is_basic_credential(val: str) -> bool:
    try:
        raw = base64.b64decode(val + "=" * (-len(val) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    return b":" in raw


def _spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, raw secret) of every secret the shape rules find, non-overlapping, in order."""
    found: list[tuple[int, int, str]] = []

    def add(m: re.Match[str], named: bool = False) -> None:
        val = m.group("val")
        if named and not is_secret_name(m.group("name")):
            return
        q, inner = _unquote(val)
        if is_masked(inner) or inner.strip().lower() in _NOT_SECRET:
            return
        if named and _NUMBER_RE.match(inner):
            return  # `token_count=5`: a number in free text is a knob, not a credential
        start = m.start("val") + len(q)
        found.append((start, start + len(inner), inner))

    if "://" in text:
        for m in _URL_RE.finditer(text):
            add(m)
    if "uthorization" in text or "UTHORIZATION" in text:
        for m in _AUTHZ_RE.finditer(text):
            add(m)
    if "earer" in text or "EARER" in text:
        for m in _BEARER_RE.finditer(text):
            add(m)
    if "asic" in text or "ASIC" in text:
        for m in _BASIC_RE.finditer(text):
            if _is_basic_credential(m.group("val")):
                add(m)
    if "=" in text:
        for m in _ASSIGN_RE.finditer(text):
            add(m, named=True)
    if '"' in text or "'" in text:
        for m in _KEYED_RE.finditer(text):
            add(m, named=True)
    if "--" in text:
        for m in _FLAG_RE.finditer(text):
            add(m, named=True)
    found.sort()
    out: list[tuple[int, int, str]] = []
    for s, e, v in found:
        if out and s < out[-1][1]:  # overlapping findings: mask their union, never half a secret
            ps, pe, _ = out[-1]
            out[-1] = (ps, max(pe, e), text[ps : max(pe, e)])
        else:
            out.append((s, e, v))
    return out


def find_secrets(text: str) -> set[str]:
    """The raw values the shape rules would mask in `text`."""
    if not text or not _triggers(text):
        return set()
    return {v for _, _, v in _spans(text)}


def mask_text(text: str) -> str:
    """Free text with the secrets the shape rules find masked (no known values needed)."""
    if not text or not _triggers(text):
        return text
    spans = _spans(text)
    if not spans:
        return text
    out, last = [], 0
    for s, e, v in spans:
        out += [text[last:s], mask(v)]
        last = e
    out.append(text[last:])
    return "".join(out)


# -- by value --------------------------------------------------------------------------------------


class Scrubber:
    """Callable that scrubs secrets out of log text: known values first, then the shape rules.

    It learns: a value the shape rules mask (say `api_key='sk-1'` in the server_args line) is
    scrubbed from every later line too, wherever it shows up alone.  Bounded by MAX_LEARNED.
    """

    def __init__(self, values: Iterable[str] = (), *, learn: bool = True) -> None:
        self.values: set[str] = set()
        self.learn = learn
        self._ordered: list[str] = []
        self.add(values)

    @classmethod
    def for_profile(cls, profile: Profile | None, **kw: Any) -> Scrubber:
        """A scrubber that knows the profile's secret values (`profile_secrets`)."""
        return cls(profile_secrets(profile), **kw)

    def add(self, values: Iterable[str]) -> None:
        new = {v for v in values if len(v) >= MIN_SCRUB_LEN and not is_masked(v)} - self.values
        if new:
            self.values |= new
            self._ordered = _by_length(self.values)

    def knows_none_of(self, text: str) -> bool:
        """No value this scrubber masks by value occurs in `text`."""
        return not any(v in text for v in self._ordered)

    def passes(self, text: str) -> bool:
        """True when this scrubber returns `text`, and each line of it, as it is and learns nothing
        from it: no known value in it, nothing the shape rules look for (no trigger spans a line
        break). The block paths (grep, scan) ask once per block instead of scrubbing line by line."""
        return not may_hold_secrets(text) and self.knows_none_of(text)

    def __call__(self, text: str) -> str:
        if not text:
            return text
        if self._ordered:
            text = _replace_values(text, self._ordered)
        if not _triggers(text):
            return text
        spans = _spans(text)
        if not spans:
            return text
        if self.learn and len(self.values) < MAX_LEARNED:
            self.add(v for _, _, v in spans)
        out, last = [], 0
        for s, e, v in spans:
            out += [text[last:s], mask(v)]
            last = e
        out.append(text[last:])
        text = "".join(out)
        return _replace_values(text, self._ordered) if self._ordered else text


def scrub_tree(obj: Any, scrubber: Any) -> Any:
    """Every string inside a JSON-like tree (dicts, lists) passed through `scrubber`."""
    if isinstance(obj, str):
        return scrubber(obj)
    if isinstance(obj, dict):
        return {k: scrub_tree(v, scrubber) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [scrub_tree(v, scrubber) for v in obj]
    return obj
