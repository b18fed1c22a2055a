"""How to move a profile to another port: which fields set it, in which file, and to what.

Why here: the launch refuses a taken port (core.control.launch.check_can_launch), and the answer is a
change to the profile.  The example profiles have fixed ports (31000-31003, 31010-31012) that every
user of a shared box starts from, and they live inside the installed package: the hint says to copy
one first rather than edit it.  The port to move to is the box's own suggestion (box/ports.py: a
port nobody listens on now, from the login's $SPECDEBUG_SIM_PORTS block where it has one).
"""

from __future__ import annotations

from pathlib import Path

from specdebug.core.fingerprint import split_argv
from specdebug.core.profiles.model import Profile
from specdebug.resources import data_dirs

__all__ = ["is_example", "port_change_hint"]


def is_example(path: Path | None) -> bool:
    """A profile shipped with specdebug (examples/ of the checkout or the wheel): copy it, never edit it."""
    if path is None:
        return False
    try:
        where = path.resolve().parent
    except OSError:
        return False
    return any(where == d.resolve() for d in data_dirs("examples"))


def _argv_has_port(profile: Profile) -> bool:
    return any(name == "--port" for name, _values in split_argv(profile.server.argv)[1])


def port_change_hint(profile: Profile, free: int | None = None, free_from: str = "") -> str:
    """One hint line: the fields that set the port, the file to change (a copy, for an example) and
    the port the box suggests."""
    port = profile.server.port
    change = (
        f"change `--port {port}` in [server] argv and `port = {port}`"
        if _argv_has_port(profile)
        else f"add `--port NEW` to [server] argv and set `port = NEW` (it listens on the default {port})"
    )
    to = ""
    if free is not None:
        block = " (this login's $SPECDEBUG_SIM_PORTS block)" if free_from == "SPECDEBUG_SIM_PORTS" else ""
        to = f" to a free one: {free} is free on the box now{block}"
    if is_example(profile.source):
        stem = profile.source.stem if profile.source is not None else profile.name
        return (
            f"{profile.name} is an example, with a fixed port every user of the box starts from: copy it "
            f"(`specdebug profile check {stem} > {stem}-mine.toml`), {change} in the copy{to}, and "
            f"launch with -c {stem}-mine.toml"
        )
    where = f" in {profile.source}" if profile.source is not None else ""
    return f"to use another port, {change}{where}{to} (or in a copy that `extends` it)"
