"""What this process is, for the marks it leaves on server records (`specdebug stop`, the TUI).

Another session reading a record then says who stopped or launched its server.  A leaf, stdlib
only: the command line names the verb before it imports anything of core (a verb such as
`sim install-box` runs on a box's python3 without the tool's dependencies).
"""

from __future__ import annotations

_acting = "specdebug"


def set_acting(what: str) -> None:
    """Name this process (`specdebug stop`, `the specdebug TUI`) for the marks it writes."""
    global _acting
    _acting = what


def acting() -> str:
    return _acting
