"""§6: clean errors, never tracebacks: deeply nested TOML is a profile error (exit 2, naming the
file), a bad keymap is reported in the TUI and ignored, and a full disk under the session folder
is one clear line while the journal keeps whole records only (no torn half-line)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specdebug.core.control.events import Verdict
from specdebug.core.journal import Journal, JournalError
from specdebug.core.profiles import ProfileError, load_profile
from specdebug.core.records import OtherRecord, VerdictRecord
from specdebug.tui.app import SpecdebugApp, load_keymap
from specdebug.tui.context import AppContext
from tests.security.cli_run import run_cli
from tests.tui.fakes import StillRemote
from tests.tui.pilotwait import toasts, until

DEEP = {
    "array": "x = " + "[" * 5000 + "]" * 5000 + "\n",
    "inline": "x = " + "{a = " * 3000 + "1" + "}" * 3000 + "\n",
    "dotted": "[server]\nargv = ['a']\n[server." + ".".join(["t"] * 3000) + "]\nx = 1\n",
}


@pytest.mark.parametrize("kind", sorted(DEEP))
def test_deeply_nested_toml_is_a_profile_error(tmp_path: Path, kind: str) -> None:
    prof = tmp_path / f"deep-{kind}.toml"
    prof.write_text(DEEP[kind])
    with pytest.raises(ProfileError) as info:
        load_profile(prof)
    assert str(prof) in str(info.value) and "nested" in str(info.value)
    log = tmp_path / "a.log"
    log.write_text("x\n")
    res = run_cli("scan", str(log), "-c", str(prof), timeout=60)
    assert res.rc == 2 and str(prof) in res.err and "Traceback" not in res.err, res.err


BAD_KEYMAPS = {
    "not_a_table": "keymap = 5\n",
    "bad_value": '[keymap]\n"app.quit" = 5\n',
    "bad_toml": "keymap = [\n",
    "deep": "keymap = " + "[" * 3000 + "]" * 3000 + "\n",
}


@pytest.mark.parametrize("kind", sorted(BAD_KEYMAPS))
async def test_bad_keymap_is_reported_and_ignored(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "keymap.toml"
    path.write_text(BAD_KEYMAPS[kind])
    keymap = load_keymap(path)
    assert keymap.problems and str(path) in keymap.problems[0]
    app = SpecdebugApp(AppContext(remotes={"box": StillRemote("box")}, selected="box"), keymap=keymap)
    async with app.run_test(size=(120, 40)) as pilot:
        assert await until(pilot, lambda: any("keymap" in m for m in toasts(app))), toasts(app)
        shown = toasts(app)
        assert any("keymap" in m for m in shown), shown
        assert app.is_running


def test_journal_caps_long_strings(tmp_path: Path) -> None:
    j = Journal(tmp_path / "s")
    j.append(VerdictRecord(outcome=Verdict(verdict="failed", excerpt=["ok", "y" * 10_000_000])))
    raw = (tmp_path / "s" / "events.jsonl").read_bytes()
    assert len(raw) < 100_000
    ev = j.events()[0]
    assert ev["excerpt"][0] == "ok" and "more characters cut" in ev["excerpt"][1]


@contextlib.contextmanager
def tiny_disk(where: Path):
    """A 64 KiB tmpfs at `where` (root only); yields False when it cannot be mounted."""
    where.mkdir()
    if os.geteuid() != 0:
        yield False
        return
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)], capture_output=True)
    if r.returncode != 0:
        yield False
        return
    try:
        yield True
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def _check_whole(path: Path, before: bytes) -> None:
    after = path.read_bytes()
    assert after == before, "a failed write left bytes behind"
    assert after.endswith(b"\n") and all(json.loads(x) for x in after.splitlines())


def test_full_disk_keeps_the_journal_whole(tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    with tiny_disk(disk) as mounted:
        if not mounted:
            pytest.skip("not root or tmpfs not mountable: the RLIMIT_FSIZE test covers this")
        session = disk / "session"
        j = Journal(session)
        j.append(OtherRecord(kind="note", text="first"))
        before = (session / "events.jsonl").read_bytes()
        (disk / "filler").write_bytes(b"f" * 40_000)  # leaves less room than the next record needs
        with pytest.raises(JournalError) as info:
            j.append(OtherRecord(kind="note", blob=["z" * 30_000] * 2), sync=True)
        assert "No space left" in str(info.value.strerror) and str(session) in str(info.value.strerror)
        _check_whole(session / "events.jsonl", before)
        res = run_cli("mark", "x" * 50_000, "--session", str(session), timeout=60)
        assert res.rc == 1 and "No space left" in res.err and "Traceback" not in res.err, res.err
        _check_whole(session / "events.jsonl", before)


_FSIZE_CHILD = """
import json, resource, signal, sys
from specdebug.core.journal import Journal, JournalError
from specdebug.core.records import OtherRecord
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
j = Journal(sys.argv[1])
j.append(OtherRecord(kind="note", text="first"))
size = (j.path).stat().st_size
resource.setrlimit(resource.RLIMIT_FSIZE, (size + 100, size + 100))
try:
    j.append(OtherRecord(kind="note", text="y" * 5000))
except JournalError as exc:
    print(json.dumps({"error": exc.strerror}))
"""


def test_file_size_limit_keeps_the_journal_whole(tmp_path: Path) -> None:
    session = tmp_path / "s"
    r = subprocess.run(
        [sys.executable, "-c", _FSIZE_CHILD, str(session)], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0 and r.stdout, r.stderr
    assert "cannot write the session journal" in json.loads(r.stdout)["error"]
    raw = (session / "events.jsonl").read_bytes()
    assert raw.count(b"\n") == 1 and json.loads(raw)["text"] == "first"
