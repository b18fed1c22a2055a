"""Hold the box's bisection lock while this process lives, or name the bisection that holds it.

Run by the client as `python3 -c SOURCE ROOT RECORD_JSON` under the stream watchdog (the link's end
sends TERM).  Stdlib only.  Two bisections on one box fought for its GPUs and each reported "not
enough memory"; now the second one is refused with the first one's own record (issue 40).

Layout: ROOT/specdebug-bisect.UID/bisect.json, one folder per box user, made by that user, 0711
(others may read the record by name, never list or write the folder), the record 0644 (other box
users are told who holds the GPUs: the client host, PID and profile names, what `ps` shows them of
the servers anyway).  A record counts only when its folder and file belong to the uid in the
folder's name (lstat: no symlink; opened O_NOFOLLOW | O_NONBLOCK: no FIFO hangs it), it is small,
and the process it names (this holder, on the box) is alive with the same uid and start time: a
holder killed without its TERM leaves a stale record that nobody mistakes for a live one.

Prints one line: `held` (then waits until ended, and removes the record) or `busy JSON` (the live
holder's record) or `error TEXT`; with `--peek` for RECORD_JSON, only `holders JSON_LIST` (takes nothing).
"""

from __future__ import annotations

import json
import os
import pwd
import signal
import stat
import sys
import time
from typing import Any

PREFIX = "specdebug-bisect."
RECORD = "bisect.json"
RECORD_MAX = 64 * 1024


def start_time(pid: int) -> str | None:
    """Field 22 of /proc/PID/stat (counted after the command name, which may hold spaces)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = text.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 and fields[0] not in ("Z", "X") else None


def holder_alive(record: dict[str, Any], uid: int) -> bool:
    pid = record.get("box_pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 1:
        return False
    try:
        if os.stat(f"/proc/{pid}").st_uid != uid:
            return False
    except OSError:
        return False
    return start_time(pid) == record.get("box_start")


def read_record(folder: str, uid: int) -> dict[str, Any] | None:
    """The record in one user's folder, if it is that user's own and well formed."""
    try:
        st = os.lstat(folder)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid:
            return None
        fd = os.open(os.path.join(folder, RECORD), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        fst = os.fstat(fd)
        if not stat.S_ISREG(fst.st_mode) or fst.st_uid != uid or fst.st_size > RECORD_MAX:
            return None
        data = os.read(fd, RECORD_MAX + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        record = json.loads(data.decode("utf-8", "replace"))
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def live_holders(root: str) -> list[dict[str, Any]]:
    """The records of live holders of the box's lock (any user's), the earliest first."""
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    found: list[dict[str, Any]] = []
    for name in names:
        if not name.startswith(PREFIX) or not name[len(PREFIX) :].isdigit():
            continue
        uid = int(name[len(PREFIX) :])
        record = read_record(os.path.join(root, name), uid)
        if record is not None and holder_alive(record, uid):
            record["box_uid"] = uid
            try:
                record["box_user"] = pwd.getpwuid(uid).pw_name
            except KeyError:
                record["box_user"] = str(uid)
            found.append(record)
    return sorted(found, key=_order)


def _order(record: dict[str, Any]) -> tuple[float, int]:
    since = record.get("since")
    return (since if isinstance(since, (int, float)) else 0.0, record.get("box_pid") or 0)


def own_folder(root: str) -> str:
    """This user's folder, made 0711 if absent; refused when it is not ours or others may write."""
    folder = os.path.join(root, PREFIX + str(os.getuid()))
    try:
        os.mkdir(folder, 0o711)
    except FileExistsError:
        pass
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        raise OSError(f"{folder} is not a folder of this user's that only it may write")
    return folder


def write_record(folder: str, record: dict[str, Any]) -> str:
    """The record written whole under a temporary name, then renamed over the old one."""
    path = os.path.join(folder, RECORD)
    tmp = os.path.join(folder, f".{RECORD}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        os.write(fd, json.dumps(record).encode())
        os.fchmod(fd, 0o644)
    finally:
        os.close(fd)
    os.rename(tmp, path)
    return path


def remove_if_mine(folder: str, path: str) -> None:
    """The record removed if it is still this process's (a same-user racer may have replaced it)."""
    mine = read_record(folder, os.getuid())
    if mine is not None and mine.get("box_pid") == os.getpid():
        try:
            os.unlink(path)
        except OSError:
            pass


def main(argv: list[str]) -> int:
    if argv[2:3] == ["--peek"]:  # read only: who holds the lock now (a launch warns before it starts)
        print("holders " + json.dumps(live_holders(argv[1])), flush=True)
        return 0
    root, asked = argv[1], json.loads(argv[2])
    try:
        folder = own_folder(root)
        busy = live_holders(root)
        if busy:
            print("busy " + json.dumps(busy[0]), flush=True)
            return 3
        record = {**asked, "box_pid": os.getpid(), "box_start": start_time(os.getpid()), "since": time.time()}
        path = write_record(folder, record)
        # two that started at one moment both saw the box free: the earlier record keeps it
        first = live_holders(root)
        if first and first[0].get("box_pid") != os.getpid():
            remove_if_mine(folder, path)
            print("busy " + json.dumps(first[0]), flush=True)
            return 3
    except (OSError, ValueError) as exc:
        print(f"error {exc}", flush=True)
        return 2

    def release(*_: object) -> None:
        remove_if_mine(folder, path)
        os._exit(0)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, release)
    print("held", flush=True)
    while True:
        signal.pause()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
