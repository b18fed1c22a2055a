"""Read-only seats watch through a view of their own, never as clients of the session's tmux server.

tmux lets a read-only client run the commands it marks harmless, and some of those act on other
clients: `detach-client -s/-a/-t` detached the driver and every seat, `detach-client -P` sent the
driver's shell SIGHUP, `attach -c` changed the session's directory, `attach -d/-x` detached or
hung up the others, `switch-client -c` moved another client, and a small read-only terminal shrank
the driver's window.  So a read-only seat gets its own tmux server (the view, `v.<uid>.sock` in the
pairing folder, run by the driver, only that user granted, read-only): its one pane is a client of
the session attached with `-r` (read-only, size ignored).  Whatever the seat runs reaches only the
view: its own clients, its own pane, its own size.  Granting write toggles that inner client
(`switch-client -r`) and the view's access, so the seat's keys then reach the app.

A read-only client ignores its size, so a small seat would see the driver's screen cut off with no
word of it.  So the view's window is the driver's size (`window-size manual`, `fit_views` keeps it
so), its inner client shows the whole screen, and the view's status line says when the seat's own
terminal is smaller than that and by how much (tmux shows the seat the part around the cursor).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from specdebug.core.pair.owner import user_name
from specdebug.core.pair.seats import Client, Mode, parse_access_list, parse_clients
from specdebug.errors import SpecdebugError

VIEW_SESSION = "view"
VIEW_RE = re.compile(r"v\.(\d+)\.sock")
TIMEOUT_S = 10.0
_INNER = "#{client_pid}\t#{client_tty}\t#{client_readonly}"
_SIZE = "#{window_width} #{window_height}"
# the view's status line, as each seat's client expands it: its terminal against the driver's screen
# (the window); one row goes to this line
CROPPED = "#{||:#{e|<:#{client_width},#{window_width}},#{e|<:#{e|-:#{client_height},1},#{window_height}}}"
VIEW_STATUS = (
    "#{?" + CROPPED + ","
    "#[reverse] the driver's screen is #{window_width}x#{window_height}; this terminal shows "
    "#{client_width}x#{e|-:#{client_height},1} of it: enlarge it to see it all #[default],"
    " read-only view of the driver's #{window_width}x#{window_height} screen}"
)
VIEW_OPTIONS = [
    ["set", "-g", "window-size", "manual"],  # the driver's size, not the seat's terminal's
    ["set", "-g", "status", "on"],
    ["set", "-g", "status-position", "top"],
    ["set", "-g", "status-left-length", "400"],
    ["set", "-g", "status-right", ""],
    ["set", "-g", "window-status-format", ""],
    ["set", "-g", "window-status-current-format", ""],
    ["set", "-g", "status-left", VIEW_STATUS],
]


class ViewError(SpecdebugError):
    """tmux refused to set up or change a view (the message says what it said)."""


def _tmux(socket: str | Path, *args: str, tmux: str = "tmux") -> subprocess.CompletedProcess[str]:
    return subprocess.run([tmux, "-S", str(socket), *args], capture_output=True, text=True, timeout=TIMEOUT_S)


def view_socket(folder: Path, uid: int) -> Path:
    return folder / f"v.{uid}.sock"


def views(folder: Path) -> dict[int, Path]:
    """uid -> view socket, for every view in the pairing folder."""
    try:
        names = os.listdir(folder)
    except OSError:
        return {}
    out = {}
    for name in names:
        m = VIEW_RE.fullmatch(name)
        if m:
            out[int(m.group(1))] = folder / name
    return out


def join_argv(view: Path, tmux: str = "tmux") -> list[str]:
    return [tmux, "-S", str(view), "attach-session", "-t", f"={VIEW_SESSION}"]


def start_view(
    folder: Path,
    main_socket: str,
    session: str,
    uid: int,
    conf: Path,
    *,
    size: tuple[int, int] = (200, 50),
    tmux: str = "tmux",
) -> Path:
    """The view server of one read-only seat, its pane a read-only client of the session."""
    sock = view_socket(folder, uid)
    inner = f"exec env -u TMUX -u TMUX_PANE {tmux} -S '{main_socket}' attach-session -r -t '={session}'"
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE", "COLUMNS", "LINES")}
    cmd = [tmux, "-S", str(sock), "-f", str(conf), "new-session", "-d", "-s", VIEW_SESSION]
    cmd += ["-x", str(size[0]), "-y", str(size[1]), "--", "sh", "-c", inner]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=TIMEOUT_S)
    if res.returncode != 0:
        raise ViewError(f"tmux could not start the read-only view: {res.stderr.strip() or res.returncode}")
    options: list[str] = []
    for option in VIEW_OPTIONS:
        options += [*option, ";"]
    res = _tmux(sock, *options[:-1], tmux=tmux)
    if res.returncode != 0:
        raise ViewError(f"tmux refused the read-only view's options: {res.stderr.strip()}")
    fit_view(sock, driver_size(main_socket, session, tmux=tmux) or size, tmux=tmux)
    set_view_access(sock, user_name(uid), Mode.RO)
    return sock


def _size(res: subprocess.CompletedProcess[str]) -> tuple[int, int] | None:
    parts = res.stdout.split()
    if res.returncode != 0 or len(parts) != 2 or not all(p.isdigit() for p in parts):
        return None
    return int(parts[0]), int(parts[1])


def driver_size(main_socket: str, session: str, *, tmux: str = "tmux") -> tuple[int, int] | None:
    """The session's window size (the driver's screen), None when tmux does not say."""
    return _size(_tmux(main_socket, "display-message", "-p", "-t", f"={session}:", _SIZE, tmux=tmux))


def fit_view(view: Path, size: tuple[int, int], *, tmux: str = "tmux") -> None:
    """The view's window to `size` (the driver's screen), when it is not that already."""
    if _size(_tmux(view, "display-message", "-p", "-t", f"={VIEW_SESSION}:", _SIZE, tmux=tmux)) == size:
        return
    _tmux(view, "resize-window", "-t", f"={VIEW_SESSION}:", "-x", str(size[0]), "-y", str(size[1]), tmux=tmux)


def fit_views(main_socket: str, session: str, folder: Path) -> None:
    """Every view to the driver's screen as it is now (the driver's app asks every second)."""
    seats = views(folder)
    size = driver_size(main_socket, session) if seats else None  # no view: no tmux to ask
    if size is not None:
        for view in seats.values():
            fit_view(view, size)


def stop_view(folder: Path, uid: int) -> None:
    sock = view_socket(folder, uid)
    if sock.exists():
        _tmux(sock, "kill-server")
        try:
            sock.unlink()
        except OSError:
            pass


def set_view_access(view: Path, user: str, mode: Mode) -> None:
    res = _tmux(view, "server-access", "-w" if mode is Mode.RW else "-r", user)
    if res.returncode != 0:
        raise ViewError(f"tmux refused to grant {user} the view: {res.stderr.strip()}")


def view_mode(view: Path) -> dict[str, Mode]:
    return parse_access_list(_tmux(view, "server-access", "-l").stdout)


def _pane_pid(view: Path) -> int | None:
    out = _tmux(view, "display-message", "-p", "-t", f"={VIEW_SESSION}:", "#{pane_pid}").stdout.strip()
    return int(out) if out.isdigit() else None


def inner_clients(main_socket: str, folder: Path) -> dict[int, tuple[int, str, bool]]:
    """client pid in the session -> (seat uid, client tty, read-only) for each view's inner client."""
    pids = {pid: uid for uid, sock in views(folder).items() if (pid := _pane_pid(sock)) is not None}
    out = {}
    for line in _tmux(main_socket, "list-clients", "-F", _INNER).stdout.splitlines():
        parts = line.split("\t")
        if len(parts) == 3 and parts[0].isdigit() and int(parts[0]) in pids:
            out[int(parts[0])] = (pids[int(parts[0])], parts[1], parts[2] == "1")
    return out


def set_view_mode(main_socket: str, folder: Path, uid: int, mode: Mode) -> None:
    """Read-write: the seat's keys reach the app (inner client writable, view granted -w); read-only: back."""
    view = view_socket(folder, uid)
    for _pid, (seat, tty, readonly) in inner_clients(main_socket, folder).items():
        if seat == uid and readonly == (mode is Mode.RW):
            res = _tmux(main_socket, "switch-client", "-c", tty, "-r")  # toggles read-only (and ignore-size)
            if res.returncode != 0:
                raise ViewError(f"tmux could not change the view's client: {res.stderr.strip()}")
    set_view_access(view, user_name(uid), mode)


def view_clients(folder: Path) -> list[Client]:
    """The seats' own terminals: the clients of every view (their users, as tmux saw them)."""
    out: list[Client] = []
    fmt = "#{client_uid}\t#{client_user}\t#{client_readonly}\t#{client_activity}\t#{client_tty}"
    for sock in views(folder).values():
        out += parse_clients(_tmux(sock, "list-clients", "-F", fmt).stdout)
    return out


def attribute(clients: list[Client], main_socket: str, folder: Path) -> list[Client]:
    """The session's clients with each view's inner client named as its seat's user (it runs as the
    driver): who typed last is then the seat, not the driver.  Keys come in on the seat's own view
    client, so its activity is the one that counts."""
    inner = {tty: seat for _pid, (seat, tty, _ro) in inner_clients(main_socket, folder).items()}
    if not inner:
        return clients
    seen = {c.uid: c for c in view_clients(folder)}
    out = []
    for c in clients:
        seat = inner.get(c.tty)
        if seat is None:
            out.append(c)
            continue
        own = seen.get(seat)
        activity = max(c.activity, own.activity if own is not None else 0)
        out.append(Client(user=user_name(seat), uid=seat, readonly=c.readonly, activity=activity, tty=c.tty))
    return out


def seat_modes(main_socket: str, folder: Path) -> dict[str, Mode]:
    """Every seat and its mode: read-write seats on the session's own list, the rest by their views."""
    modes = parse_access_list(_tmux(main_socket, "server-access", "-l").stdout)
    for sock in views(folder).values():
        modes.update(view_mode(sock))
    return modes


def seat_clients(main_socket: str, folder: Path, fmt: str) -> list[Client]:
    """Who is attached: the session's own clients (not the views' inner ones) and the views' clients."""
    inner = {tty for _pid, (_seat, tty, _ro) in inner_clients(main_socket, folder).items()}
    own = [
        c for c in parse_clients(_tmux(main_socket, "list-clients", "-F", fmt).stdout) if c.tty not in inner
    ]
    return own + view_clients(folder)
