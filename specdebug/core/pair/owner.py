"""Whose pairing session this is: the folder and the socket must be owned by the uid its name claims.

A pairing folder is `<root>/specdebug-pair.<uid>.<name>/` (core/pair/session.py); anyone who can write to
the root can make one with any uid in its name.  `pair --join` and `--list` take only sessions
whose folder and socket lstat() as that uid, and say whose session it is before attaching.
"""

from __future__ import annotations

import pwd
import stat
from pathlib import Path


def user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def ownership_problem(folder: Path, claimed_uid: int, socket_file: str = "tmux.sock") -> str | None:
    """Why a pairing folder is not the session its name claims (None: folder and socket are owned
    by the uid in the name).  Anyone can make `/tmp/specdebug-pair.<uid>.<name>`: a look-alike
    whose screen imitates a prompt must never be joined as that user's session."""
    claimed = user_name(claimed_uid)
    try:
        st = folder.lstat()
        if not stat.S_ISDIR(st.st_mode):
            return f"{folder} is not a folder"
        if st.st_uid != claimed_uid:
            return f"{folder} was made by {user_name(st.st_uid)} (uid {st.st_uid}), not by {claimed} as its name claims"
        sock = folder / socket_file
        ss = sock.lstat()
    except OSError as exc:
        return f"{folder}: {exc.strerror}"
    if not stat.S_ISSOCK(ss.st_mode):
        return f"{sock} is not a socket"
    if ss.st_uid != claimed_uid:
        return (
            f"{sock} belongs to {user_name(ss.st_uid)} (uid {ss.st_uid}), not to {claimed} as its name claims"
        )
    return None
