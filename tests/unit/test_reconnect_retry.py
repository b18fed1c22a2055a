"""A read a dropped link broke is made again on the new link (remote/reconnect.py), on this machine as the
box with its resident helper: the link is dropped as a network fault would drop it, mid-check."""

from __future__ import annotations

import pytest

from specdebug.remote.reconnect import across_drops
from specdebug.transport.base import ConnectionDropped
from tests.boxes import local_box


async def test_a_check_a_drop_broke_is_made_again_once_the_link_is_back(tmp_path) -> None:
    marker = tmp_path / "marker"
    marker.write_text("on the box")
    box = local_box()
    said: list[str] = []
    calls = 0

    async def check() -> bytes:
        nonlocal calls
        calls += 1
        if calls == 1:
            box.drop_connection()  # the link goes while the check runs
        return await box.read_file(str(marker))

    try:
        await box.wait_connected(30)
        first = box.generation
        data = await across_drops([box], check, timeout=60, on_drop=lambda exc: said.append(str(exc)))
        assert data == b"on the box" and calls == 2 and box.generation > first
        assert len(said) == 1  # the drop was said while the check waited for the new link
    finally:
        await box.close()


async def test_a_second_drop_is_shown_not_retried_for_ever(tmp_path) -> None:
    box = local_box()

    async def check() -> bytes:
        box.drop_connection()
        return await box.read_file(str(tmp_path))

    try:
        await box.wait_connected(30)
        with pytest.raises(ConnectionDropped):
            await across_drops([box], check, timeout=60)
    finally:
        await box.close()
