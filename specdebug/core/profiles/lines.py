"""Finding the line of a TOML key (`[table]` headers, dotted keys) without a TOML parser that keeps
positions: the loader's errors point at lines with it.
"""

from __future__ import annotations

import re

_HEADER_RE = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY_RE = re.compile(
    r"""^\s*((?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*'))*)\s*="""
)


def _split_dotted(key: str) -> tuple[str, ...]:
    parts = re.findall(r"""[A-Za-z0-9_-]+|"[^"]*"|'[^']*'""", key)
    return tuple(p[1:-1] if p[:1] in "\"'" else p for p in parts)


def find_key_line(text: str, path: tuple[str, ...]) -> int | None:
    """1-based line where the key at `path` is set, by scanning table headers and `key =` lines.

    Falls back to the closest enclosing definition (an inline table, or the table header), so a
    missing key is reported at its table.  Good enough for error messages; not a TOML parser.
    """
    table: tuple[str, ...] = ()
    best: tuple[int, int] | None = None  # (matched length, line)
    in_multiline = False
    for no, line in enumerate(text.splitlines(), start=1):
        if in_multiline:
            if line.count('"""') % 2 == 1 or line.count("'''") % 2 == 1:
                in_multiline = False
            continue
        m = _HEADER_RE.match(line)
        if m:
            table = _split_dotted(m.group(1))
            full = table
        else:
            km = _KEY_RE.match(line)
            if not km:
                continue
            full = table + _split_dotted(km.group(1))
            rest = line[km.end() :]
            if rest.count('"""') % 2 == 1 or rest.count("'''") % 2 == 1:
                in_multiline = True
            if path[: len(full)] == full and len(path) > len(full):
                # inline table or array holding the key: look for the key name on this line
                inner = path[len(full)]
                if re.search(rf"(^|[{{,\s]){re.escape(inner)}\s*=|[\"']{re.escape(inner)}[\"']\s*=", rest):
                    return no
        if full == path:
            return no
        if path[: len(full)] == full and (best is None or len(full) > best[0]):
            best = (len(full), no)
    return best[1] if best else None
