"""Pure parts of pairing: tmux output parsing, seat changes, who typed last, version policy, ACLs."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from specdebug.core.pair import acl as pair_acl
from specdebug.core.pair import find as pair_find
from specdebug.core.pair import session as pair
from specdebug.core.pair.session import Client, Mode, PairError, Seat


def test_parse_version() -> None:
    assert pair.parse_version("tmux 3.3a\n") == (3, 3)
    assert pair.parse_version("tmux 3.2") == (3, 2)
    assert pair.parse_version("tmux next-3.5") == (3, 5)
    assert pair.parse_version("tmux master") >= (3, 3)


def test_old_tmux_refuses_seats_with_a_clear_message() -> None:
    with pytest.raises(PairError, match=r"tmux 3.2 cannot enforce read-only seats.*>= 3.3.*advisory"):
        pair.check_seats_supported((3, 2), {"bob": Mode.RO})
    with pytest.raises(PairError, match="seats for other users"):
        pair.check_seats_supported((2, 9), {"carol": Mode.RW})
    pair.check_seats_supported((3, 2), {})  # pairing with yourself needs no access list
    pair.check_seats_supported((3, 3), {"bob": Mode.RO})


def test_parse_access_list_and_clients() -> None:
    assert pair.parse_access_list("bob (R)\ncarol (W)\ngarbage\n") == {"bob": Mode.RO, "carol": Mode.RW}
    text = "0\troot\t0\t1700000005\t/dev/pts/1\n1001\tbob\t1\t1700000009\t/dev/pts/2\nbad line\n"
    clients = pair.parse_clients(text)
    assert [(c.user, c.uid, c.readonly, c.activity) for c in clients] == [
        ("root", 0, False, 1700000005),
        ("bob", 1001, True, 1700000009),
    ]


def test_seats_and_changes() -> None:
    acl = {"bob": Mode.RO, "carol": Mode.RW}
    attached = [Client("bob", 1001, True, 5), Client("bob", 1001, True, 6), Client("root", 0, False, 7)]
    seats = pair.seats_now(acl, attached)
    assert seats == [Seat("bob", Mode.RO, 2), Seat("carol", Mode.RW, 0)]
    assert pair.seat_changes([], seats) == ["bob joined (read-only)"]
    later = [Seat("bob", Mode.RW, 2), Seat("carol", Mode.RW, 1)]
    assert pair.seat_changes(seats, later) == ["bob is now read-write", "carol joined (read-write)"]
    assert pair.seat_changes(later, [Seat("carol", Mode.RW, 0)]) == [
        "carol left",
        "bob's seat was revoked (disconnected)",
    ]


def test_acting_client_prefers_the_latest_key_and_the_owner_on_a_tie() -> None:
    owner, guest = Client("alice", 1000, False, 100), Client("bob", 1001, False, 100)
    assert pair.acting_client([guest, owner], 1000) is owner
    guest.activity = 101
    assert pair.acting_client([guest, owner], 1000) is guest
    assert pair.acting_client([], 1000) is None


def test_names_and_users() -> None:
    assert pair.check_name("pair-1_x") == "pair-1_x"
    for bad in ("", "-x", "a b", "a.b", "a/b", "x" * 41):
        with pytest.raises(PairError):
            pair.check_name(bad)
    with pytest.raises(PairError, match="no such user"):
        pair.user_uid("no_such_user_sdpair")


def test_join_argv_never_ignores_the_seats_size() -> None:
    argv = pair.join_argv("/tmp/x/tmux.sock", "s1")
    assert argv == ["tmux", "-S", "/tmp/x/tmux.sock", "attach-session", "-t", "=s1"]
    assert pair.join_argv("/s", "s1", readonly=True)[-2:] == ["-f", "read-only"]
    assert "-r" not in argv


def test_acl_round_trip() -> None:
    data = pair_acl.encode(7, {1002: pair_acl.X, 1001: pair_acl.X | pair_acl.R})
    entries = pair_acl.decode(data)
    tags = [t for t, _, _ in entries]
    assert tags == [
        pair_acl.USER_OBJ,
        pair_acl.USER,
        pair_acl.USER,
        pair_acl.GROUP_OBJ,
        pair_acl.MASK,
        pair_acl.OTHER,
    ]
    assert [(p, i) for t, p, i in entries if t == pair_acl.USER] == [(5, 1001), (1, 1002)]  # sorted by uid
    assert next(p for t, p, _ in entries if t == pair_acl.MASK) == 5
    assert next(p for t, p, _ in entries if t == pair_acl.OTHER) == 0
    with pytest.raises(ValueError):
        pair_acl.decode(b"\x01\x00\x00\x00")


def test_acl_on_a_real_folder(tmp_path: Path) -> None:
    folder = tmp_path / "f"
    folder.mkdir(mode=0o700)
    try:
        pair_acl.apply(folder, 7, {65534: pair_acl.X})
    except pair_acl.AclUnsupported:
        pytest.skip("this filesystem does not store POSIX ACLs")
    mode = stat.S_IMODE(folder.stat().st_mode)
    assert mode == 0o710  # group bits show the mask: search only; others nothing
    assert pair_acl.named_users(folder) == {65534: pair_acl.X}
    pair_acl.apply(folder, 7, {})
    assert pair_acl.named_users(folder) == {}
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_discover_lists_only_reachable_pair_folders(tmp_path_factory, monkeypatch) -> None:
    import socket

    tmp_path = tmp_path_factory.mktemp("pair")  # short: a socket path has at most 107 bytes (tmp_path
    # names the test, and a parallel worker adds its own folder)
    monkeypatch.setenv(pair.ENV_ROOT, str(tmp_path))
    mine = pair.folder_for("s1")
    mine.mkdir(mode=0o700)
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(mine / pair.SOCKET_FILE))
    (tmp_path / "specdebug-pair.0.no-socket").mkdir()
    (tmp_path / "unrelated").mkdir()
    other = tmp_path / "specdebug-pair.4242.theirs"  # another user's: listed when we may pass through
    other.mkdir(mode=0o711)
    theirs = socket.socket(socket.AF_UNIX)
    theirs.bind(str(other / pair.SOCKET_FILE))
    if os.geteuid() != 0:
        pytest.skip("another user's folder and socket need root to make (chown)")
    os.chown(other, 4242, -1)  # really theirs: the folder and the socket are owned by the uid named
    os.lchown(other / pair.SOCKET_FILE, 4242, -1)
    fake = tmp_path / "specdebug-pair.4243.fake"  # claims uid 4243, made by us: a look-alike
    fake.mkdir(mode=0o711)
    fake_sock = socket.socket(socket.AF_UNIX)
    fake_sock.bind(str(fake / pair.SOCKET_FILE))
    monkeypatch.setattr(pair, "is_alive", lambda path, session=None: False)  # our s1 has no tmux server
    try:
        assert [p.name for p in pair_find.discover()] == ["theirs"]  # our dead one is left out
        monkeypatch.setattr(pair, "is_alive", lambda path, session=None: True)
        found = pair_find.discover()
        assert [(p.name, p.socket) for p in found] == [
            ("s1", str(mine / pair.SOCKET_FILE)),
            ("theirs", str(other / pair.SOCKET_FILE)),
        ]
        assert pair_find.find("s1").socket == str(mine / pair.SOCKET_FILE)
        with pytest.raises(PairError, match="no pairing session named 'nope'"):
            pair_find.find("nope")
        with pytest.raises(PairError, match="not by 4243 as its name claims: refusing a look-alike"):
            pair_find.find("fake")
    finally:
        sock.close()
        theirs.close()
        fake_sock.close()


def test_an_existing_folder_that_is_not_ours_is_refused(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(pair.ENV_ROOT, str(tmp_path))
    target = tmp_path / "elsewhere"
    target.mkdir()
    pair.folder_for("s2").symlink_to(target)  # someone planted a link where our folder goes
    with pytest.raises(PairError, match="not a folder of yours"):
        pair._make_folder(pair.folder_for("s2"))
    assert os.listdir(target) == []
