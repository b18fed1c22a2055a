"""Small TUI first-hour fixes (issue 41): the Bench pane's hint names the keys the pane binds, an
unknown keymap id is an error naming the file and the field."""

from __future__ import annotations

from pathlib import Path

from textual.binding import Binding

from specdebug.tui.app import binding_ids, load_keymap
from specdebug.tui.panes.bench import BenchPane
from specdebug.tui.panes.bench_view import progress_text


def test_bench_hint_keys_are_the_panes_keys() -> None:
    keys = {b.key_display or b.key for b in BenchPane.BINDINGS if isinstance(b, Binding)}
    hint = progress_text(None, "builtin", None).plain.removeprefix("ready: ")
    named = [part.split()[0] for part in hint.split(" · ")]
    assert named and all(k in keys for k in named), (named, sorted(keys))  # `s baseline`: no s binding


def test_unknown_keymap_id_is_an_error_naming_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "keymap.toml"
    path.write_text('[keymap]\n"bench.basline" = "ctrl+b"\n"bench.run" = "ctrl+r"\n')
    keymap = load_keymap(path, known=binding_ids())
    assert dict(keymap) == {"bench.run": "ctrl+r"}
    assert len(keymap.problems) == 1, keymap.problems
    problem = keymap.problems[0]
    assert str(path) in problem and "'bench.basline'" in problem and "'bench.baseline'" in problem
