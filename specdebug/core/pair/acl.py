"""POSIX access ACLs for the pairing folder, written as the kernel's xattr (no `setfacl` needed).

The pairing folder must be reachable by its owner and the granted users only.  Unix modes cannot
name several users without a group made for them (root only), so the folder gets mode 0700 plus
one ACL entry per granted user: `--x` on the folder (reach a known name, never list it), `rw-` on
the tmux socket (connect), `r--` on the seat list.  The xattr format is the kernel's
`system.posix_acl_access` (version 2, entries sorted by tag then id); a filesystem without ACL
support answers EOPNOTSUPP and the caller falls back (see core/pair/session.py).
"""

from __future__ import annotations

import errno
import os
import struct
from collections.abc import Iterable

from specdebug.errors import SpecdebugError

XATTR = "system.posix_acl_access"
_VERSION = 2
_UNDEFINED_ID = 0xFFFFFFFF
# tags (linux/posix_acl_xattr.h)
USER_OBJ, USER, GROUP_OBJ, GROUP, MASK, OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
R, W, X = 4, 2, 1


class AclUnsupported(OSError, SpecdebugError):
    """The filesystem holding the folder does not store POSIX ACLs."""


def encode(owner_perm: int, users: dict[int, int]) -> bytes:
    """The xattr value for: owner `owner_perm`, each uid in `users` its perm, group and other nothing.

    The mask is the union of the named users' perms, so chmod by another program (tmux sets the
    socket's x bits) cannot widen what the named users get beyond what we gave.
    """
    mask = 0
    for perm in users.values():
        mask |= perm
    entries = [(USER_OBJ, owner_perm, _UNDEFINED_ID)]
    entries += [(USER, perm, uid) for uid, perm in sorted(users.items())]
    entries += [(GROUP_OBJ, 0, _UNDEFINED_ID), (MASK, mask, _UNDEFINED_ID), (OTHER, 0, _UNDEFINED_ID)]
    return struct.pack("<I", _VERSION) + b"".join(struct.pack("<HHI", *e) for e in entries)


def decode(data: bytes) -> list[tuple[int, int, int]]:
    """(tag, perm, id) entries of an xattr value (tests and `pair --list` read them back)."""
    if len(data) < 4 or struct.unpack_from("<I", data)[0] != _VERSION or (len(data) - 4) % 8:
        raise ValueError("not a POSIX ACL xattr (version 2)")
    return [struct.unpack_from("<HHI", data, off) for off in range(4, len(data), 8)]


def named_users(path: str | os.PathLike[str]) -> dict[int, int]:
    """uid -> perm of the named-user entries on `path` (empty when it has no ACL)."""
    try:
        data = os.getxattr(path, XATTR, follow_symlinks=False)
    except OSError:
        return {}
    return {ident: perm for tag, perm, ident in decode(data) if tag == USER}


def apply(path: str | os.PathLike[str], owner_perm: int, users: dict[int, int]) -> None:
    """Replace the access ACL of `path` (never follows a symlink)."""
    try:
        os.setxattr(path, XATTR, encode(owner_perm, users), follow_symlinks=False)
    except OSError as exc:
        if exc.errno in (errno.EOPNOTSUPP, errno.ENOTSUP):
            raise AclUnsupported(exc.errno, f"{path}: this filesystem does not store POSIX ACLs") from exc
        raise


def perms_for(uids: Iterable[int], perm: int) -> dict[int, int]:
    return {uid: perm for uid in uids}
