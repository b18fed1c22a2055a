"""The `specdebug stop` hint of a quit pairing session reaches the driver's own terminal (issue 26)."""

from __future__ import annotations

import argparse
import os
import stat
from pathlib import Path
from types import SimpleNamespace

from specdebug.verbs import pair as pair_verb
from specdebug.verbs.tui import save_quit_note


def test_the_note_is_written_once_private_and_never_through_a_planted_file(tmp_path, monkeypatch):
    note = tmp_path / "note.txt"
    monkeypatch.setenv("SPECDEBUG_QUIT_NOTE", str(note))
    save_quit_note(["specdebug: base is still running on box; stop it with: specdebug stop box -c b.toml"])
    assert "stop it with" in note.read_text()
    assert stat.S_IMODE(note.stat().st_mode) == 0o600
    planted = tmp_path / "planted"
    target = tmp_path / "victim"
    target.write_text("keep")
    planted.symlink_to(target)
    monkeypatch.setenv("SPECDEBUG_QUIT_NOTE", str(planted))
    save_quit_note(["x"])
    assert target.read_text() == "keep"


def test_pair_prints_the_apps_quit_note_after_the_session_ends(monkeypatch, capsys):
    started: dict[str, list[str]] = {}

    def fake_start(name, argv, seats):
        started["argv"] = argv
        return SimpleNamespace(name=name, socket="/s", session="n", access="x", seats=[], join="j")

    def fake_attach(argv):  # the app ran in tmux and quit, leaving a server running
        note = next(a.split("=", 1)[1] for a in started["argv"] if a.startswith("SPECDEBUG_QUIT_NOTE="))
        os.environ["SPECDEBUG_QUIT_NOTE"] = note
        save_quit_note(
            ["specdebug: base is still running on box; stop it with: specdebug stop box -c b.toml"]
        )
        return 0

    monkeypatch.setattr(pair_verb.pair, "start", fake_start)
    monkeypatch.setattr(pair_verb.pair, "join_argv", lambda sock, session: ["tmux", "attach"])
    monkeypatch.setattr(pair_verb.pair, "is_alive", lambda sock: False)
    monkeypatch.setattr(pair_verb, "_attach", fake_attach)
    monkeypatch.delenv("SPECDEBUG_QUIT_NOTE", raising=False)
    args = argparse.Namespace(
        profile=None,
        name="n",
        allow=[],
        allow_ro=[],
        json=False,
        detach=False,
        ssh_config=None,
        session=None,
        layout=None,
        hosts=["box"],
    )
    assert pair_verb._start(args) == 0
    printed = capsys.readouterr().out
    assert "stop it with: specdebug stop box -c b.toml" in printed
    note_dir = Path(
        next(a.split("=", 1)[1] for a in started["argv"] if a.startswith("SPECDEBUG_QUIT_NOTE="))
    ).parent
    assert not note_dir.exists()  # the private folder is removed afterwards
    os.environ.pop("SPECDEBUG_QUIT_NOTE", None)
