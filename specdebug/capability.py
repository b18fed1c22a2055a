"""Write access: what a read-only front end does not hold.

`--readonly` used to be a list of pane actions to disable, and every action missing from the list
leaked (attach wrote the server record, a host key could be saved).  Now the check sits at the
sinks: every core function that changes the box or local trust (launch, stop, attach's record,
benchmark, bisect, journal writes such as marks, saving a host key) calls `require_write` at its
entry, and a read-only front end cannot pass it, whichever action led there.

Two ways to be read-only, both checked by `require_write`:
- the process: `specdebug --readonly` and the browser seat call `enter_readonly_process()` before
  anything connects; from then on no object in the process may write, including ones made later;
- an object: a read-only app marks what it holds (its remotes, its journal) with `hold_readonly`,
  so an in-process read-only app (tests, the demo) is denied even when its process is not.

The check is deliberately dumb (a flag and an identity set): it cannot be argued with by the
arguments of a call, and it never depends on the UI having listed the action.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

from specdebug.errors import SpecdebugError

_lock = threading.Lock()
_process_readonly = False
_readonly_objects: dict[int, weakref.ref[Any] | None] = {}  # id -> weak ref (None: not weak-referenceable)


class ReadOnlyError(PermissionError, SpecdebugError):
    """A read-only front end reached a function that changes the box or local trust."""

    def __init__(self, action: str) -> None:
        super().__init__(f"read-only: {action} is not allowed in a read-only seat")
        self.action = action


def enter_readonly_process() -> None:
    """This process observes only, for the rest of its life (there is no way back)."""
    global _process_readonly
    _process_readonly = True


def process_is_readonly() -> bool:
    return _process_readonly


@contextmanager
def readonly_process() -> Iterator[None]:
    """Tests: make the process read-only for a block, as `specdebug --readonly` does for good."""
    global _process_readonly
    before = _process_readonly
    _process_readonly = True
    try:
        yield
    finally:
        _process_readonly = before


def hold_readonly(*objects: object) -> None:
    """Mark objects a read-only front end holds (remotes, journals): writes through them are refused."""
    with _lock:
        for obj in objects:
            if obj is None:
                continue
            key = id(obj)
            try:
                ref: weakref.ref[Any] | None = weakref.ref(obj, partial(_forget_ref, key))
            except TypeError:
                ref = None
            _readonly_objects[key] = ref


def _forget_ref(key: int, _ref: object) -> None:
    """weakref callback: the object went, so does its mark."""
    _forget(key)


def _forget(key: int) -> None:
    with _lock:
        _readonly_objects.pop(key, None)


def is_readonly(obj: object) -> bool:
    if _process_readonly:
        return True
    with _lock:
        if id(obj) not in _readonly_objects:
            return False
        ref = _readonly_objects[id(obj)]
        return ref is None or ref() is obj


def require_write(action: str, *targets: object) -> None:
    """Raise ReadOnlyError unless writing is allowed here: the process is not read-only and no
    target (the remote acted on, the journal written to) is held by a read-only front end."""
    if _process_readonly or any(t is not None and is_readonly(t) for t in targets):
        raise ReadOnlyError(action)
