"""Pairing: one specdebug app in a tmux session on its own socket, with seats for other users.

Runs on the local (shared) machine, never on the box.  Who may do what is tmux's job, not ours:
tmux >= 3.3 checks every connecting client's uid (SO_PEERCRED) against its `server-access` list,
refuses users not on it ("access not allowed"), and refuses every key and command from a user
marked read-only ("client is read-only"), in the server, whatever the client asks.

The socket lives in a folder only its owner and the granted users can reach:
`<root>/specdebug-pair.<uid>.<name>/` (root = $SPECDEBUG_PAIR_DIR or /tmp, one place every user
agrees on), mode 0700 plus POSIX ACL entries for the granted users (core/pair/acl.py): search on
the folder, read-write on the socket, read on the seat list.  On a filesystem without ACLs the
folder is 0711 (reachable, not listable) and the socket 0666: access then rests on tmux's list
alone, which still refuses everyone not granted; `access` in the result says which.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import re
import shutil
import stat
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from specdebug.capability import require_write
from specdebug.core.pair import acl as pair_acl
from specdebug.core.pair import view as pair_view
from specdebug.core.pair.owner import user_name as user_name  # the pairing API in one place
from specdebug.core.pair.seats import CLIENT_FORMAT as CLIENT_FORMAT  # the pairing API in one place
from specdebug.core.pair.seats import Client as Client
from specdebug.core.pair.seats import Mode as Mode
from specdebug.core.pair.seats import Seat as Seat
from specdebug.core.pair.seats import acting_client as acting_client
from specdebug.core.pair.seats import parse_access_list as parse_access_list
from specdebug.core.pair.seats import parse_clients as parse_clients
from specdebug.core.pair.seats import seat_changes as seat_changes
from specdebug.core.pair.seats import seats_now as seats_now
from specdebug.errors import SpecdebugError

ENV_SOCKET = "SPECDEBUG_PAIR_SOCKET"  # set in the session: the app shows seats when it finds these
ENV_NAME = "SPECDEBUG_PAIR_NAME"
ENV_ROOT = "SPECDEBUG_PAIR_DIR"
PREFIX = "specdebug-pair."
SOCKET_FILE, SEATS_FILE, CONF_FILE = "tmux.sock", "seats.json", "tmux.conf"
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,39}")
MIN_ACCESS = (3, 3)  # server-access
TMUX_TIMEOUT_S = 10.0

# What a Textual app needs from tmux.  escape-time 0: Esc reaches the app at once (tmux's default
# 500 ms makes closing a modal feel broken); RGB: true colour passes through to every seat's
# terminal; mouse on: tmux forwards clicks and wheel to the app; window-size smallest with
# aggressive-resize: the window fits the smallest attached terminal, so no seat sees a cut-off
# screen; status off: the app's own header shows the seats.
TMUX_OPTIONS = [
    "set -s escape-time 0",
    "set -s exit-empty on",
    "set -as terminal-features ',*:RGB'",
    "set -as terminal-overrides ',*:Tc'",
    "set -g mouse on",
    "set -g focus-events on",
    "set -g status off",
    "set -g window-size smallest",
    "setw -g aggressive-resize on",
    "set -g destroy-unattached off",
    "set -g remain-on-exit off",
    "set -g set-clipboard off",
]


class PairError(SpecdebugError):
    """A pairing request that cannot be carried out (message says what and how to fix it)."""


@dataclass
class PairInfo:
    name: str
    socket: str
    session: str
    owner: str
    folder: str
    seats: list[Seat] = field(default_factory=list)
    access: str = "acl"  # acl: folder and socket ACLs + tmux's list; tmux-only: tmux's list alone
    join: str = ""
    owner_uid: int = -1  # the uid owning the folder and the socket (checked: the name claims it)
    revoked: list[str] = field(default_factory=list)  # seats taken away (the driver may grant them again)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        views = pair_view.views(Path(self.folder))
        by_uid = {u: user_name(u) for u in views}
        data["seats"] = [
            {"user": s.user, "mode": str(s.mode), "attached": s.attached, "join": self.join}
            for s in self.seats
        ]
        for seat in data["seats"]:  # a seat with a view of its own joins that
            uid = next((u for u, n in by_uid.items() if n == seat["user"]), None)
            if uid is not None:
                seat["join"] = " ".join(pair_view.join_argv(views[uid]))
        return data


# -- tmux -------------------------------------------------------------------------------------------


def tmux_version(tmux: str = "tmux") -> tuple[int, int]:
    """(major, minor) of the local tmux; PairError when there is none."""
    if shutil.which(tmux) is None:
        raise PairError("tmux not found: install it (Debian: apt-get install tmux)")
    out = subprocess.run([tmux, "-V"], capture_output=True, text=True, timeout=TMUX_TIMEOUT_S).stdout
    return parse_version(out)


def parse_version(text: str) -> tuple[int, int]:
    """`tmux 3.3a` -> (3, 3); `tmux next-3.4` -> (3, 4); `tmux master` -> a high version."""
    m = re.search(r"(\d+)\.(\d+)", text)
    if m is None:
        return (99, 0) if "master" in text else (0, 0)
    return int(m.group(1)), int(m.group(2))


def check_seats_supported(version: tuple[int, int], seats: dict[str, Mode]) -> None:
    """Before 3.3 tmux has no access list: letting another user in would mean an open socket with
    no check at all, and read-only would be only the guest's own choice (`attach -r`)."""
    if seats and version < MIN_ACCESS:
        ro = [u for u, m in seats.items() if m is Mode.RO]
        what = "read-only seats (--allow-ro)" if ro else "seats for other users (--allow)"
        raise PairError(
            f"tmux {version[0]}.{version[1]} cannot enforce {what}: tmux >= 3.3 (server-access) is "
            "needed; read-only would only be advisory here. Upgrade tmux, or pair without other seats."
        )


def _tmux(socket: str, *args: str, tmux: str = "tmux") -> subprocess.CompletedProcess[str]:
    return subprocess.run([tmux, "-S", socket, *args], capture_output=True, text=True, timeout=TMUX_TIMEOUT_S)


def is_alive(socket: str, session: str | None = None) -> bool:
    """True when a tmux server answers on the socket (and has the session, when given)."""
    if not os.path.exists(socket):
        return False
    args = ["has-session", "-t", f"={session}"] if session else ["list-sessions"]
    try:
        res = _tmux(socket, *args)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return res.returncode == 0 and "access not allowed" not in res.stderr


def clients(socket: str) -> list[Client]:
    return parse_clients(_tmux(socket, "list-clients", "-F", CLIENT_FORMAT).stdout)


# -- the folder -------------------------------------------------------------------------------------


def pair_root() -> Path:
    return Path(os.environ.get(ENV_ROOT) or "/tmp")


def folder_for(name: str, uid: int | None = None, root: Path | None = None) -> Path:
    return (root or pair_root()) / f"{PREFIX}{os.getuid() if uid is None else uid}.{name}"


def check_name(name: str) -> str:
    if not NAME_RE.fullmatch(name):
        raise PairError(f"session name {name!r}: use letters, digits, - and _ (at most 40, no leading -)")
    return name


def user_uid(user: str) -> int:
    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        raise PairError(f"no such user on this machine: {user!r}") from None


def _make_folder(folder: Path) -> None:
    """Create the folder as ours and private; an existing one must be ours, a real dir, and dead."""
    try:
        folder.mkdir(mode=0o700)
    except FileExistsError:
        st = folder.lstat()
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            raise PairError(f"{folder} exists and is not a folder of yours: refusing to use it") from None
        if is_alive(str(folder / SOCKET_FILE)):
            raise PairError(
                f"a pairing session is already running in {folder}; pick another --name"
            ) from None
        shutil.rmtree(folder)  # a stale folder of ours (its server is gone)
        folder.mkdir(mode=0o700)
    os.chmod(folder, 0o700)


def share(folder: Path, seats: dict[str, Mode]) -> str:
    """Let exactly the seat users reach the folder, the seat list and their socket (the session's
    for a direct read-write seat, their own view's otherwise); returns the access kind."""
    uids = [user_uid(u) for u in seats]
    sock = folder / SOCKET_FILE
    own_view = pair_view.views(folder)
    direct = [u for u in uids if u not in own_view]
    try:
        pair_acl.apply(folder, 7, pair_acl.perms_for(uids, pair_acl.X))
        for uid, view in own_view.items():
            pair_acl.apply(view, 6, pair_acl.perms_for([uid] if uid in uids else [], pair_acl.R | pair_acl.W))
        if sock.exists():
            pair_acl.apply(sock, 6, pair_acl.perms_for(direct, pair_acl.R | pair_acl.W))
        if (folder / SEATS_FILE).exists():
            pair_acl.apply(folder / SEATS_FILE, 6, pair_acl.perms_for(uids, pair_acl.R))
        return "acl"
    except pair_acl.AclUnsupported:
        os.chmod(folder, 0o711 if uids else 0o700)
        for view in [sock, *own_view.values()]:
            if view.exists():
                os.chmod(view, 0o666 if uids else 0o600)
        if (folder / SEATS_FILE).exists():
            os.chmod(folder / SEATS_FILE, 0o644)
        return "tmux-only"


def _write_seats(folder: Path, info: PairInfo) -> None:
    path = folder / SEATS_FILE
    tmp = folder / f".{SEATS_FILE}.tmp"
    tmp.write_text(json.dumps(info.to_json(), indent=1))
    os.replace(tmp, path)


def read_seats(folder: Path) -> dict[str, Any] | None:
    try:
        seats: dict[str, Any] = json.loads((folder / SEATS_FILE).read_text())
        return seats
    except (OSError, ValueError):
        return None


# -- start, change, join, list ----------------------------------------------------------------------


def join_argv(socket: str, session: str, *, readonly: bool = False, tmux: str = "tmux") -> list[str]:
    """What a seat runs.  No `-r`: that also sets ignore-size, and a seat whose size is ignored
    can get a cut-off screen; read-only is tmux's list's business.  `--readonly` asks for
    read-only on a read-write seat (`-f read-only`, the seat's own choice)."""
    argv = [tmux, "-S", socket, "attach-session", "-t", f"={session}"]
    return argv + (["-f", "read-only"] if readonly else [])


def start(
    name: str,
    app_argv: list[str],
    seats: dict[str, Mode],
    *,
    size: tuple[int, int] = (200, 50),
    cwd: str | None = None,
    tmux: str = "tmux",
) -> PairInfo:
    """Start the tmux server and the app session, grant the seats; the app runs until `q`."""
    require_write("start a pairing session")
    check_name(name)
    me = os.getuid()
    for user in seats:
        if user_uid(user) in (me, 0):
            raise PairError(f"{user} always has full access to your tmux server: not a seat to grant")
    check_seats_supported(tmux_version(tmux), seats)
    folder = folder_for(name)
    _make_folder(folder)
    sock = str(folder / SOCKET_FILE)
    conf = folder / CONF_FILE
    conf.write_text("\n".join(TMUX_OPTIONS) + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "TMUX", "TMUX_PANE")}
    # the pane: the app, then the folder goes (a crash stays on screen for a while to be read)
    wrapper = (
        'd=$1; shift; "$@"; rc=$?; rm -rf -- "$d"; '
        'if [ $rc -ne 0 ]; then echo "specdebug exited with status $rc"; sleep 30; fi; exit $rc'
    )
    pane_env = [f"{ENV_SOCKET}={sock}", f"{ENV_NAME}={name}", "COLORTERM=truecolor"]
    cmd = [tmux, "-S", sock, "-f", str(conf), "new-session", "-d", "-s", name]
    cmd += ["-x", str(size[0]), "-y", str(size[1]), "-c", cwd or os.getcwd()]
    for assignment in pane_env:
        cmd += ["-e", assignment]
    cmd += ["--", "sh", "-c", wrapper, "sh", str(folder), *app_argv]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=TMUX_TIMEOUT_S)
    if res.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        raise PairError(f"tmux could not start the session: {res.stderr.strip() or res.returncode}")
    try:
        for user, mode in seats.items():
            if mode is Mode.RW:
                _grant_tmux(sock, user, mode)
            else:  # a view of their own (core/pair/view.py): nothing they run reaches the others
                pair_view.start_view(folder, sock, name, user_uid(user), conf, size=size, tmux=tmux)
        info = PairInfo(
            name=name, socket=sock, session=name, owner=user_name(me), folder=str(folder), owner_uid=me
        )
        info.seats = [Seat(u, m) for u, m in seats.items()]
        info.join = " ".join(join_argv(sock, name, tmux=tmux))
        _write_seats(folder, info)
        info.access = share(folder, seats)
    except Exception:
        kill(sock)
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return info


def _grant_tmux(socket: str, user: str, mode: Mode) -> None:
    res = _tmux(socket, "server-access", "-w" if mode is Mode.RW else "-r", user)
    if res.returncode != 0:
        raise PairError(f"tmux refused to grant {user}: {res.stderr.strip()}")


def grant(socket: str, user: str, mode: Mode) -> None:
    """Give `user` a seat, or change its mode; attached clients of that user change at once."""
    require_write("change a pairing seat")
    folder = Path(socket).parent
    uid = user_uid(user)
    if uid in (os.getuid(), 0):
        raise PairError(f"{user} always has full access to your tmux server: not a seat to change")
    try:
        if uid in pair_view.views(folder):
            pair_view.set_view_mode(socket, folder, uid, mode)
        elif mode is Mode.RW:
            _grant_tmux(socket, user, mode)
        else:  # read-only: off the session's own list (tmux disconnects them), onto a view of their own
            _tmux(socket, "server-access", "-d", user)
            data = read_seats(folder) or {}
            session = str(data.get("session") or folder.name.rsplit(".", 1)[-1])
            pair_view.start_view(folder, socket, session, uid, folder / CONF_FILE)
    except pair_view.ViewError as exc:
        raise PairError(str(exc)) from None
    _update_seats(folder, socket, granted=user)


def revoke(socket: str, user: str) -> None:
    """Take the seat away: tmux disconnects the user's clients ("access not allowed")."""
    require_write("revoke a pairing seat")
    pair_view.stop_view(Path(socket).parent, user_uid(user))
    res = _tmux(socket, "server-access", "-d", user)
    if res.returncode != 0 and "not found" not in res.stderr:
        raise PairError(f"tmux refused to revoke {user}: {res.stderr.strip()}")
    _update_seats(Path(socket).parent, socket, revoked=user)


def _update_seats(folder: Path, socket: str, *, granted: str = "", revoked: str = "") -> None:
    """Rewrite the seat list from tmux's; a revoked user stays listed as revoked (to grant again)."""
    acl = pair_view.seat_modes(socket, folder)
    data = read_seats(folder) or {}
    was = [u for u in data.get("revoked", []) if isinstance(u, str) and u != granted and u not in acl]
    info = PairInfo(
        name=data.get("name", ""),
        socket=socket,
        session=data.get("session", ""),
        owner=data.get("owner", user_name(os.getuid())),
        folder=str(folder),
        seats=[Seat(u, m) for u, m in acl.items()],
        join=data.get("join", ""),
        owner_uid=os.getuid(),
        revoked=sorted({*was, revoked} - {""}),
    )
    _write_seats(folder, info)
    share(folder, acl)


def kill(socket: str) -> None:
    """End the session's tmux server (the app with it)."""
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        _tmux(socket, "kill-server")


def wait_gone(socket: str, timeout: float = 10.0) -> bool:
    """Wait until the server on `socket` has exited (tests, and `pair` after the driver quits)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not is_alive(socket):
            return True
        time.sleep(0.1)
    return False
