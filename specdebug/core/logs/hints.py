"""How to fix a startup failure whose cause is known: text appended to the verdict's reason.

The reason says what the log said; for failures a user can fix in one step (a Python module
missing on the box), the hint says that step.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_MISSING_MODULE = re.compile(r"No module named '?(?P<module>[A-Za-z_][\w.]*)'?")

SPECDEBUG_MISSING = (
    "the box's python3 cannot import specdebug (the simulated examples run `python3 -m specdebug.sim` "
    "there): run `specdebug sim install-box --user` on the box (a venv of its own on PATH; Debian's "
    "system pip refuses `pip install`), or set argv[0] in the profile to a Python that has it "
    "(see examples/README.md)"
)


def hint_for(lines: Iterable[str]) -> str | None:
    """A fix for the first known cause in the reason / log lines, else None."""
    for line in lines:
        m = _MISSING_MODULE.search(line)
        if m is None:
            continue
        module = m.group("module").split(".")[0]
        if module == "specdebug":
            return SPECDEBUG_MISSING
        return f"the box's Python has no module {module!r}: install it there, or use the Python that has it"
    return None


def with_hint(reason: str, lines: Iterable[str] = ()) -> str:
    hint = hint_for([reason, *lines])
    return f"{reason}. Fix: {hint}" if hint and hint not in reason else reason
