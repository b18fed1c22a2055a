"""Shared box journals (`--session box:/abs/dir`) against another box user, and on a full disk.

Over the real sshd with throwaway box users.  Before: a planted `events.jsonl` symlink made the
victim append records to any file of theirs (O_APPEND|O_CREAT, no O_NOFOLLOW, no folder check),
a record's `by` was whatever the client's $USER said, and on a full disk the append left a torn
record and said only "append failed: 5".  Now: the folder must be the login's own and private,
or group-shared when the user asks (`box:/abs/dir,group=GROUP`); no symlink is followed; the box
stamps the writer (its login and uid); a record is written whole or not at all, with a sentence.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from pathlib import Path

import pytest

from tests.security.boxusers import box_users, cli, shared_tmp, skip_reason, users_sshd

pytestmark = [pytest.mark.slow, pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason()))]


@pytest.fixture(scope="module")
def sshd():
    with users_sshd() as server:
        yield server


def mark(user, spec: str, text: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return cli(user, "mark", "--host", user.alias, "--session", spec, text, env=env)


def one_sentence(stderr: str) -> None:
    assert "Traceback" not in stderr and stderr.strip(), stderr
    assert "append failed: 5" not in stderr, stderr


def test_planted_journal_symlinks_and_open_folders_are_refused(sshd) -> None:
    with box_users(sshd, 2) as (victim, attacker), shared_tmp() as shared:
        standin = victim.home / "bashrc"
        victim.sh(f"printf 'original\\n' > {standin}")
        planted = shared / "sess"
        attacker.sh(f"mkdir -m 777 {planted} && ln -s {standin} {planted}/events.jsonl")
        r = mark(victim, f"box:{planted}", "hello")
        assert r.returncode != 0, r.stdout + r.stderr
        one_sentence(r.stderr)
        assert f"owned by uid {attacker.uid}" in r.stderr, r.stderr
        assert standin.read_text() == "original\n"

        # the victim's own folder, but open to everyone: refused (unless a group share was asked for)
        mine = shared / "mine"
        victim.sh(f"mkdir {mine} && chmod 777 {mine}")
        r = mark(victim, f"box:{mine}", "hello")
        assert r.returncode != 0 and "writable by group or others" in r.stderr, r.stderr
        assert not (mine / "events.jsonl").exists()

        # a symlink in the victim's own private folder is not followed either
        private = victim.home / "sess"
        victim.sh(f"mkdir -m 700 {private} && ln -s {standin} {private}/events.jsonl")
        r = mark(victim, f"box:{private}", "hello")
        assert r.returncode != 0 and "is a symlink" in r.stderr, r.stderr
        assert standin.read_text() == "original\n"

        # a hard link to a file of the victim's (made by the victim, say by mistake) is refused
        victim.sh(f"rm {private}/events.jsonl && ln {standin} {private}/events.jsonl")
        r = mark(victim, f"box:{private}", "hello")
        assert r.returncode != 0 and "hard links" in r.stderr, r.stderr
        assert standin.read_text() == "original\n"


def test_group_share_only_when_asked_and_records_name_the_box_login(sshd) -> None:
    group = f"sdg{secrets.token_hex(3)}"
    with box_users(sshd, 3, group=group, in_group=2) as (alice, bob, outsider), shared_tmp() as shared:
        team = shared / "team"
        alice.sh(f"mkdir {team} && chgrp {group} {team} && chmod 2770 {team}")
        r = mark(bob, f"box:{team}", "bob was here")  # not asked for: a group-writable folder is refused
        assert r.returncode != 0 and f"owned by uid {alice.uid}" in r.stderr, r.stderr
        assert f"box:{team},group={group}" in r.stderr  # and the message says how to ask for it
        one_sentence(r.stderr)

        spec = f"box:{team},group={group}"
        r = mark(bob, spec, "bob was here", env={"USER": "mallory", "LOGNAME": "mallory"})
        assert r.returncode == 0, r.stderr
        r = mark(alice, spec, "alice too")
        assert r.returncode == 0, r.stderr
        # each member writes a file of their own (test_box_users_journal_read: who wrote what)
        records = [
            json.loads(line)
            for user in (bob, alice)
            for line in (team / f"events.{user.uid}.jsonl").read_text().splitlines()
        ]
        assert [(e["by"], e["uid"]) for e in records] == [(bob.name, bob.uid), (alice.name, alice.uid)]
        assert records[0]["by_declared"] == "mallory"  # what the client claimed is kept apart, not trusted

        r = mark(outsider, spec, "me too")  # not in the group: refused with a sentence
        assert r.returncode != 0, r.stderr
        one_sentence(r.stderr)
        assert "not in group" in r.stderr, r.stderr

        # the user asked for a group share, but the folder is open to everyone: still refused
        alice.sh(f"chmod 2777 {team}")
        r = mark(alice, spec, "again")
        assert r.returncode != 0 and "writable by everyone" in r.stderr, r.stderr


@pytest.fixture
def small_disk():
    """A 64 KiB tmpfs of the test's own (we run as root), unmounted after."""
    where = Path(f"/tmp/sdbox-disk-{secrets.token_hex(4)}")
    where.mkdir(mode=0o711)
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k,mode=0711", "tmpfs", str(where)], capture_output=True
    )
    if r.returncode != 0:
        where.rmdir()
        pytest.skip(f"cannot mount a small tmpfs: {r.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], capture_output=True)
        where.rmdir()


def test_full_disk_leaves_no_torn_record_and_says_so(sshd, small_disk: Path) -> None:
    with box_users(sshd, 1) as (user,):
        sess = small_disk / "sess"
        sess.mkdir(mode=0o700)
        os.chown(sess, user.uid, user.gid)
        spec = f"box:{sess}"
        assert mark(user, spec, "first").returncode == 0
        before = (sess / "events.jsonl").read_bytes()
        user.sh(f"head -c 40000 /dev/zero > {sess}/filler")  # most of the disk
        r = mark(user, spec, "x" * 60000)  # more than is left
        assert r.returncode != 0, r.stdout
        one_sentence(r.stderr)
        assert "disk is full" in r.stderr and "not written" in r.stderr, r.stderr
        assert (sess / "events.jsonl").read_bytes() == before  # whole or nothing: nothing partial left
        user.sh(f"rm {sess}/filler")
        assert mark(user, spec, "after").returncode == 0  # and the journal goes on, line by line
        lines = (sess / "events.jsonl").read_text().splitlines()
        assert [json.loads(line)["label"] for line in lines] == ["first", "after"]
