"""Reading a shared box journal (`--session box:/abs/dir`) against other box users, over the real sshd.

Before: appends were guarded, but reads went through a plain read of `<dir>/events.jsonl`, which
follows symlinks and checks no folder: another user's folder with a planted `events.jsonl` link made
the victim read (and show) any file of theirs, or the attacker's forged records; and in a group
journal (`box:/abs/dir,group=G`) every member could append a line claiming to be another member
(the shared file is group-writable; the box's `by` stamp only holds for lines that went through it).
Now: reads refuse links and folders that are not the user's own and private (the append rule); in a
group journal each member writes a file of their own, and every record is named by its file's owner
as the box sees it: one claiming another writer is shown as forged.
"""

from __future__ import annotations

import json
import secrets
import subprocess

import pytest

from specdebug.core.boxjournal import BoxJournal
from specdebug.remote.api import RemoteError
from specdebug.remote.client import BoxClient
from tests.boxes import ssh_box
from tests.security.boxusers import BoxUser, box_users, cli, shared_tmp, skip_reason, users_sshd

pytestmark = [pytest.mark.slow, pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason()))]

SECRET = "not-for-the-journal-4f1c"


@pytest.fixture(scope="module")
def sshd():
    with users_sshd() as server:
        yield server


async def login_as(user: BoxUser) -> BoxClient:
    r = ssh_box(user.alias, ssh_config=user.config, keepalive_interval=1.0, connect_timeout=10.0)
    await r.start()
    await r.wait_connected(30)
    return r


def record(kind: str, **data: object) -> str:
    return json.dumps({"kind": kind, "ts": 1_700_000_000.0, "eid": secrets.token_hex(8), **data})


def mark(user: BoxUser, spec: str, text: str) -> subprocess.CompletedProcess:
    return cli(user, "mark", "--host", user.alias, "--session", spec, text)


async def test_reads_refuse_planted_links_and_folders_not_ours(sshd) -> None:
    with box_users(sshd, 2) as (victim, attacker), shared_tmp() as shared:
        secret = victim.home / "notes"  # a private file of the victim's that parses as a record
        victim.sh(f"umask 077; printf '%s\\n' '{record('mark', label=SECRET)}' > {secret}")
        planted = shared / "planted"
        attacker.sh(f"mkdir -m 777 {planted} && ln -s {secret} {planted}/events.jsonl")
        forged = shared / "forged"  # the attacker's own folder, readable by all, with made-up records
        attacker.sh(
            f"mkdir -m 755 {forged} && printf '%s\\n' '{record('mark', label='fake')}' > {forged}/events.jsonl"
        )
        own = victim.home / "sess"  # the victim's own private folder, with a link planted in it
        victim.sh(f"mkdir -m 700 {own} && ln -s {secret} {own}/events.jsonl")
        remote = await login_as(victim)
        try:
            for folder, why in (
                (planted, f"owned by uid {attacker.uid}"),
                (forged, f"owned by uid {attacker.uid}"),
                (own, "is a symlink"),
            ):
                journal = BoxJournal(remote, str(folder))
                with pytest.raises(RemoteError) as got:
                    await journal.refresh()
                assert why in str(got.value) and "refusing to read" in str(got.value), str(got.value)
                assert SECRET not in json.dumps(journal.events()) and "fake" not in json.dumps(
                    journal.events()
                )

            # a verb says so in one sentence and shows nothing of the file
            r = cli(victim, "history", "--host", victim.alias, "--session", f"box:{planted}")
            assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
            assert "refusing to read" in r.stderr and SECRET not in r.stdout + r.stderr, r.stderr

            # the victim's own private journal still reads (a mark made through the box)
            victim.sh(f"rm {own}/events.jsonl")
            assert mark(victim, f"box:{own}", "mine").returncode == 0
            journal = BoxJournal(remote, str(own))
            await journal.refresh()
            assert [e["label"] for e in journal.events()] == ["mine"]
        finally:
            await remote.close()


async def test_group_records_name_the_writer_the_box_saw(sshd) -> None:
    group = f"sdg{secrets.token_hex(3)}"
    with box_users(sshd, 3, group=group) as (alice, bob, carol), shared_tmp() as shared:
        team = shared / "team"
        alice.sh(f"mkdir {team} && chgrp {group} {team} && chmod 3770 {team}")
        spec = f"box:{team},group={group}"
        assert mark(alice, spec, "alice's mark").returncode == 0
        r = mark(bob, spec, "bob's mark")
        assert r.returncode == 0, r.stderr
        # each member writes a file of their own, which the others can read but not write
        alice_file, bob_file = team / f"events.{alice.uid}.jsonl", team / f"events.{bob.uid}.jsonl"
        assert alice_file.stat().st_uid == alice.uid and alice_file.stat().st_mode & 0o777 == 0o640
        claim = record("mark", label="alice approves", by=alice.name, uid=alice.uid)
        assert bob.sh(f"printf '%s\\n' '{claim}' >> {alice_file}", check=False).returncode != 0
        # so bob forges in his own file: the record says alice
        bob.sh(f"printf '%s\\n' '{claim}' >> {bob_file}")
        # and a file in the old shared layout, group-writable: nobody can tell who wrote its lines
        bob.sh(
            f"umask 007; printf '%s\\n' '{record('mark', label='old', by=carol.name)}' > {team}/events.jsonl"
        )

        remote = await login_as(carol)
        try:
            journal = BoxJournal(remote, f"{team},group={group}")
            await journal.refresh()
        finally:
            await remote.close()
        # read as records (the forged marks are the reader's, never written back)
        got = {getattr(r, "label", None): r for r in journal.records()}
        assert (got["alice's mark"].by, got["alice's mark"].uid) == (alice.name, alice.uid)
        assert (got["bob's mark"].by, got["bob's mark"].uid) == (bob.name, bob.uid)
        assert not got["alice's mark"].forged and not got["bob's mark"].forged
        forged = got["alice approves"]
        assert (forged.by, forged.uid) == (bob.name, bob.uid)  # the writer the box saw
        assert forged.forged is True and alice.name in str(forged.by_claimed)
        assert got["old"].by_verified is False
        assert "forged" not in forged.to_json()  # what the reader concluded is not a field on disk
