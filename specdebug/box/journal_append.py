"""A journal file ON THE BOX: append one whole record (`python3 -c SOURCE PATH [GROUP]`, record on
stdin), or read what was appended (`python3 -c SOURCE --read PATH GROUP OFFSETS_JSON MAX`).

Two specdebug instances share a box journal; each record must land as one whole line, or not at
all.  Under an exclusive lock (every writer goes through here): one `write` on an O_APPEND
descriptor, then fsync; a short write or a failed fsync (a full disk) is cut back to the size
before it, so no torn record is left; a torn tail left by a writer killed mid-line is ended with a
newline first, so the new record starts on its own line.

On a shared box the folder and the file are another user's way in: a planted `events.jsonl`
symlink would have us append to any file of ours.  So the file is opened inside the folder without
following symlinks, and refused unless the folder is ours and writable by nobody else; with GROUP
(the user asked for a group-shared journal) the folder may be that group's (group-writable, not
world-writable).  The record names its writer as the box sees it (this login, by uid), not the
`by` the client declared.  Prints `by NAME UID`; exit 5 with one sentence on stderr when refused
or not written.

In a group journal each member appends to a file of their own (`events.<uid>.jsonl`, group-readable,
writable by its owner only; the folder sticky), so who wrote a record is the file's owner as the
box sees it: a member can put anything in their own file, never in another's.  Reads follow the
same rule as appends (no symlink followed, the folder checked, regular files with one link) and
answer, for each file, its owner as observed here; the client names every record by that owner
and shows a record claiming someone else as forged (core/boxjournal.py).  Stdlib only, Python >= 3.7.
"""

from __future__ import annotations

import errno
import fcntl
import grp
import json
import os
import pwd
import stat
import sys
from typing import Any

EVENTS_MODE = 0o600


class Refused(Exception):
    """The journal cannot be written safely, or was not written (the message says why)."""


def login() -> tuple[str, int]:
    uid = os.getuid()
    try:
        return pwd.getpwuid(uid).pw_name, uid
    except KeyError:
        return str(uid), uid


def _group_id(group: str) -> int:
    try:
        gid = grp.getgrnam(group).gr_gid
    except KeyError:
        raise Refused(f"no group {group!r} on the box") from None
    if gid not in os.getgroups() and gid != os.getgid():
        raise Refused(f"this login is not in group {group!r}")
    return gid


def _gname(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def own_file(base: str, uid: int) -> str:
    """A group member's own journal file: `events.jsonl` -> `events.<uid>.jsonl`."""
    stem, ext = os.path.splitext(base)
    return f"{stem}.{uid}{ext}"


def open_folder(folder: str, group: str | None, create: bool = True) -> int:
    """The folder as a descriptor (created private, or group-shared when asked), once checked.
    Not created when `create` is false (a reader): FileNotFoundError then."""
    gid = _group_id(group) if group else None
    if not create and not os.path.lexists(folder):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), folder)
    if not os.path.lexists(folder):
        os.makedirs(os.path.dirname(folder) or "/", mode=0o700, exist_ok=True)
        try:
            os.mkdir(folder, 0o700)
            if gid is not None:
                os.chown(folder, -1, gid)
                os.chmod(folder, 0o3770)  # sticky: a member cannot rename or remove another's file
        except FileExistsError:
            pass
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        raise Refused(f"journal folder {folder}: {exc.strerror} (a symlink is not followed)") from None
    st = os.fstat(fd)
    mode = stat.S_IMODE(st.st_mode)
    why = None
    ours_private = st.st_uid == os.getuid() and not mode & 0o022
    if ours_private:
        pass
    elif gid is None:
        why = f"is owned by uid {st.st_uid}, not by this login (uid {os.getuid()})"
        if st.st_uid == os.getuid():
            why = f"is writable by group or others (mode {mode:o})"
        if mode & 0o020 and not mode & 0o002:
            why += f" (shared with a group: ask for it with --session box:{folder},group={_gname(st.st_gid)})"
    elif mode & 0o002:
        why = f"is writable by everyone (mode {mode:o})"
    elif st.st_gid != gid:
        why = f"belongs to group {st.st_gid}, not to {group}"
    if why is not None:
        os.close(fd)
        raise Refused(f"journal folder {folder} {why}: refusing to {'write' if create else 'read'} there")
    return fd


def _check_file(fd: int, path: str, gid: int | None, verb: str = "write to") -> os.stat_result:
    """A regular file with one link, ours (a reader of a group journal: any member's, not open to
    everyone)."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise Refused(f"journal {path} is not a regular file")
    if st.st_nlink != 1:
        raise Refused(f"journal {path} has {st.st_nlink} hard links: refusing to {verb} it")
    if gid is None and st.st_uid != os.getuid():
        raise Refused(f"journal {path} is owned by uid {st.st_uid}, not by this login: refusing to {verb} it")
    if gid is not None and stat.S_IMODE(st.st_mode) & 0o002:
        raise Refused(f"journal {path} is writable by everyone: refusing to {verb} it")
    return st


def stamp(data: bytes, name: str, uid: int) -> bytes:
    """The record with its writer as the box sees it (one JSON object per line)."""
    try:
        record: Any = json.loads(data.decode("utf-8"))
    except ValueError:
        raise Refused("the record is not one JSON object") from None
    if not isinstance(record, dict):
        raise Refused("the record is not one JSON object")
    declared = record.get("by")
    record["by"], record["uid"] = name, uid
    if declared not in (None, name):
        record["by_declared"] = declared
    return (json.dumps(record, ensure_ascii=False, separators=(", ", ": ")) + "\n").encode("utf-8")


def _write_whole(fd: int, data: bytes) -> None:
    """Write under the lock; on any failure cut the file back to where it was (whole or nothing)."""
    fcntl.flock(fd, fcntl.LOCK_EX)
    size = os.fstat(fd).st_size
    if size and os.pread(fd, 1, size - 1) != b"\n":
        data = b"\n" + data
    try:
        if os.write(fd, data) != len(data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        os.fsync(fd)
    except OSError as exc:
        try:
            os.ftruncate(fd, size)
            os.fsync(fd)
        except OSError:
            pass
        why = "the box's disk is full" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else exc.strerror
        raise Refused(f"{why} ({exc.strerror}): the record was not written, nothing partial left") from None


def append_record(path: str, data: bytes, group: str | None = None) -> str:
    """Append `data` (one JSON record) as one whole line; returns the writer's name (Refused: why not)."""
    name, uid = login()
    data = stamp(data, name, uid)
    folder, base = os.path.split(path)
    dfd = open_folder(folder, group)
    try:
        gid = _group_id(group) if group else None
        if gid is not None:  # a group journal: each member writes a file of their own
            base = own_file(base, uid)
            path = os.path.join(folder, base)
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
        try:
            fd = os.open(base, flags, 0o640 if gid is not None else EVENTS_MODE, dir_fd=dfd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise Refused(f"journal {path} is a symlink: refusing to write through it") from None
            raise Refused(f"journal {path}: {exc.strerror}") from None
        try:
            st = _check_file(fd, path, None)  # ours, whatever the group: nobody else writes in it
            if gid is not None and (st.st_gid != gid or stat.S_IMODE(st.st_mode) != 0o640):
                os.fchown(fd, -1, gid)  # the group reads it, only we write it (whatever the umask)
                os.fchmod(fd, 0o640)
            _write_whole(fd, data)
        finally:
            os.close(fd)
    finally:
        os.close(dfd)
    return name


def _owner(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _journal_files(dfd: int, base: str, group: bool) -> list[str]:
    if not group:
        return [base]
    stem, ext = os.path.splitext(base)
    mine = []
    for name in sorted(os.listdir(dfd)):
        mid = name[len(stem) + 1 : -len(ext)] if name.startswith(stem + ".") and name.endswith(ext) else ""
        if name == base or mid.isdigit():
            mine.append(name)
    return mine


def _read_one(
    dfd: int, folder: str, name: str, gid: int | None, offset: int, room: int
) -> tuple[dict[str, Any], bytes]:
    path = os.path.join(folder, name)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dfd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Refused(f"journal {path} is a symlink: refusing to read through it") from None
        raise
    try:
        st = _check_file(fd, path, gid, "read")
        start = 0 if offset > st.st_size else offset  # shrank (rewritten): from the start
        data = os.pread(fd, max(0, min(room, st.st_size - start)), start)
    finally:
        os.close(fd)
    info = {
        "name": name,
        "uid": st.st_uid,
        "by": _owner(st.st_uid),
        "shared": bool(stat.S_IMODE(st.st_mode) & 0o022),  # others could write in it: writer unknown
        "offset": start,
        "size": st.st_size,
        "len": len(data),
    }
    return info, data


def read_records(
    path: str, group: str | None, offsets: dict[str, int], budget: int
) -> tuple[dict[str, Any], bytes]:
    """What the journal files hold past `offsets` (at most `budget` bytes in all), each file with
    its owner as the box sees it.  A file refused in a group folder is skipped and named (one
    member's planted link must not stop the others' records); in a private folder it is an error."""
    folder, base = os.path.split(path)
    try:
        dfd = open_folder(folder, group, create=False)
    except FileNotFoundError:
        return {"files": [], "refused": []}, b""
    files: list[dict[str, Any]] = []
    refused: list[str] = []
    chunks: list[bytes] = []
    try:
        gid = _group_id(group) if group else None
        for name in _journal_files(dfd, base, gid is not None):
            try:
                info, data = _read_one(dfd, folder, name, gid, int(offsets.get(name, 0)), budget)
            except FileNotFoundError:
                continue  # nobody wrote yet
            except (Refused, OSError) as exc:
                why = (
                    str(exc)
                    if isinstance(exc, Refused)
                    else f"journal {os.path.join(folder, name)}: {exc.strerror}"
                )
                if gid is None:
                    raise Refused(why) from None
                refused.append(why)
                continue
            budget -= len(data)
            files.append(info)
            chunks.append(data)
    finally:
        os.close(dfd)
    return {"files": files, "refused": refused}, b"".join(chunks)


FRAME = "@@specdebug@@"  # remote/boxcode.py's FRAME: the answer's header line starts with it


def read_main(argv: list[str]) -> None:
    path = os.path.expanduser(argv[0])
    group = argv[1] or None
    try:
        head, data = read_records(path, group, json.loads(argv[2]), int(argv[3]))
    except Refused as exc:
        sys.stderr.write(f"{exc}\n")
        sys.exit(5)
    except OSError as exc:
        sys.stderr.write(f"journal {path}: {exc.strerror}: cannot read it\n")
        sys.exit(5)
    out = sys.stdout.buffer
    out.write((FRAME + json.dumps(head) + "\n").encode("utf-8"))
    out.write(data)
    out.flush()


def main() -> None:
    if sys.argv[1:2] == ["--read"]:
        read_main(sys.argv[2:])
        return
    path = os.path.expanduser(sys.argv[1])
    group = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] else None
    try:
        name = append_record(path, sys.stdin.buffer.read(), group)
    except Refused as exc:
        sys.stderr.write(f"{exc}\n")
        sys.exit(5)
    except OSError as exc:
        sys.stderr.write(f"journal {path}: {exc.strerror}: the record was not written\n")
        sys.exit(5)
    sys.stdout.write(f"by {name} {os.getuid()}\n")


if __name__ == "__main__":
    main()
