"""The write capability: a read-only process refuses everything; a read-only app's objects refuse
writes through them while the rest of the process may still write."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from specdebug import capability
from specdebug.capability import ReadOnlyError
from specdebug.core.journal import Journal
from specdebug.core.records import MarkRecord


class Thing:
    pass


def test_held_objects_refuse_others_do_not(tmp_path: Path) -> None:
    ro, rw = Journal(tmp_path / "ro"), Journal(tmp_path / "rw")
    capability.hold_readonly(ro, None)
    with pytest.raises(ReadOnlyError, match="read-only: journal mark"):
        ro.append(MarkRecord(label="x"))
    rw.append(MarkRecord(label="y"))
    assert not (tmp_path / "ro").exists()
    assert [e["label"] for e in rw.events()] == ["y"]
    remote = Thing()
    capability.hold_readonly(remote)
    with pytest.raises(ReadOnlyError):
        capability.require_write("launch", remote, rw)  # any read-only target is enough
    capability.require_write("launch", Thing(), rw)


def test_a_collected_object_does_not_poison_its_successor_at_the_same_address() -> None:
    obj = Thing()
    capability.hold_readonly(obj)
    addr = id(obj)
    del obj
    gc.collect()
    assert addr not in capability._readonly_objects


def test_readonly_process_is_total_and_restored(tmp_path: Path) -> None:
    assert not capability.process_is_readonly()
    with capability.readonly_process():
        assert capability.is_readonly(Thing())
        with pytest.raises(ReadOnlyError):
            capability.require_write("save a host key")
    assert not capability.process_is_readonly()
    capability.require_write("save a host key")
    assert isinstance(ReadOnlyError("x"), PermissionError)
