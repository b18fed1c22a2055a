"""Unit tests run bisections with stand-in trials on a box that must not be touched (tests/boxes.py
UntouchableBox): the box's bisection lock (core/bisect/boxlock.py, taken at the first launch) is not
theirs to test; tests/security/test_bisect_box_lock.py tests it on a real box."""

from __future__ import annotations

import contextlib

import pytest


@pytest.fixture(autouse=True)
def _no_box_lock(monkeypatch):
    from specdebug.core.bisect import run as bisect_run

    @contextlib.asynccontextmanager
    async def no_lock(*args, **kwargs):
        yield

    monkeypatch.setattr(bisect_run, "hold_box", no_lock)
