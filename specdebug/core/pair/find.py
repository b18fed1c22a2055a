"""Finding a pairing session to join: only those whose folder and socket are their claimed owner's.

`pair --list` and `pair --join NAME` (specdebug/verbs/pair.py) read the pairing root
(core/pair/session.py) through here; a look-alike folder (core/pair/owner.py) is refused, with why.  A
seat with a view of its own (core/pair/view.py) joins the view, never the session's server.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from pathlib import Path

from specdebug.core.pair import session as pair
from specdebug.core.pair import view as pair_view
from specdebug.core.pair.owner import ownership_problem, user_name


def discover(root: Path | None = None, refused: list[str] | None = None) -> list[pair.PairInfo]:
    """Pairing sessions this user may reach: ours, and others' whose folder lets us in; each one's
    folder and socket owned by the user its name claims (the others go to `refused`, with why)."""
    root = root or pair.pair_root()
    found = []
    try:
        entries = sorted(root.iterdir())
    except OSError:
        return []
    for folder in entries:
        m = re.fullmatch(re.escape(pair.PREFIX) + r"(\d+)\.(" + pair.NAME_RE.pattern + ")", folder.name)
        if m is None or not os.access(folder, os.X_OK):
            continue
        sock = folder / pair.SOCKET_FILE
        with contextlib.suppress(OSError):
            if not stat.S_ISSOCK(sock.lstat().st_mode):
                continue
            why = ownership_problem(folder, int(m.group(1)))
            if why is not None:
                if refused is not None:
                    refused.append(f"{m.group(2)}: {why}")
                continue
            if int(m.group(1)) == os.getuid() and not pair.is_alive(str(sock)):
                continue  # ours and dead (its server was killed): nothing to join
            data = pair.read_seats(folder) or {}
            info = pair.PairInfo(
                name=m.group(2),
                socket=str(sock),
                session=str(data.get("session") or m.group(2)),
                owner=user_name(int(m.group(1))),
                folder=str(folder),
                seats=[pair.Seat(s["user"], pair.Mode(s["mode"])) for s in data.get("seats", [])],
                join=" ".join(pair.join_argv(str(sock), str(data.get("session") or m.group(2)))),
                owner_uid=int(m.group(1)),
            )
            view = pair_view.view_socket(folder, os.getuid())
            if _own_view(view, int(m.group(1))):  # our seat is read-only: we join our view
                info.socket, info.session = str(view), pair_view.VIEW_SESSION
                info.join = " ".join(pair_view.join_argv(view))
            found.append(info)
    return found


def find(name: str, socket: str | None = None) -> pair.PairInfo:
    """The session to join: by --socket, or by name among the reachable ones (ours first); only
    sessions whose folder and socket belong to the user the name claims (PairError: why not)."""
    if socket:
        return _by_socket(name, Path(socket))
    refused: list[str] = []
    matches = [p for p in discover(refused=refused) if p.name == name]
    mine = [p for p in matches if p.owner_uid == os.getuid()]
    if mine:
        return mine[0]
    if len(matches) == 1:
        return matches[0]
    lookalikes = [r for r in refused if r.startswith(f"{name}: ")]
    if not matches and lookalikes:
        raise pair.PairError(f"not joining pairing session {lookalikes[0]}: refusing a look-alike")
    if not matches:
        raise pair.PairError(f"no pairing session named {name!r} that you may join (specdebug pair --list)")
    owners = ", ".join(p.owner for p in matches)
    raise pair.PairError(f"several sessions named {name!r} (owners: {owners}): give --socket PATH")


def check_owner(info: pair.PairInfo, owner: str | None) -> None:
    """PairError when `owner` (pair --join --owner USER) is not the user whose session `info` is:
    the joiner meant someone else's screen."""
    if owner is not None and owner != info.owner:
        raise pair.PairError(
            f"not joining pairing session {info.name!r}: it is {info.owner}'s (uid {info.owner_uid}), "
            f"not {owner}'s"
        )


def _by_socket(name: str, sock: Path) -> pair.PairInfo:
    """--socket PATH: the session of whoever owns the socket, if its folder is theirs too."""
    try:
        uid = sock.lstat().st_uid
    except OSError as exc:
        raise pair.PairError(f"--socket {sock}: {exc.strerror}") from None
    why = ownership_problem(sock.parent, uid) if sock.name == pair.SOCKET_FILE else None
    if why is None and sock.parent.lstat().st_uid != uid:
        why = f"{sock.parent} is not the folder of {user_name(uid)}, who owns the socket"
    if why is not None:
        raise pair.PairError(f"not joining {sock}: {why}")
    return pair.PairInfo(
        name=name,
        socket=str(sock),
        session=name,
        owner=user_name(uid),
        folder=str(sock.parent),
        owner_uid=uid,
    )


def _own_view(view: Path, owner_uid: int) -> bool:
    """A view socket for us in the folder, made by the session's owner (as its folder was)."""
    try:
        st = view.lstat()
    except OSError:
        return False
    return stat.S_ISSOCK(st.st_mode) and st.st_uid == owner_uid
