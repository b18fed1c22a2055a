"""A DataTable whose lines follow its measured column widths.

Why: `add_row` and `update_cell(..., update_width=True)` measure the columns on the table's next
idle, but a line drawn in between is cached under a key without the widths and is shown from that
cache until some other cell changes (Textual issue #3533). On a loaded client the Hosts pane kept a
row drawn at the header's widths, the GPUs cut to "...(1" and the GPU table's names to "NVID", for as
long as the facts stayed the same.  Every table of the TUI is one of these (tests/unit/test_layering.py).
"""

from __future__ import annotations

from typing import Any

from textual import events
from textual.widgets import DataTable

from specdebug.tui.widgets.in_turn import OwnKeysInTurn


class MeasuredTable(OwnKeysInTurn, DataTable[Any]):
    """DataTable that draws its lines afresh once it has measured updated cells, and whose cursor
    keys, and the keys bound above it, act in turn (tui.widgets.in_turn)."""

    CHAIN_IN_TURN = True

    async def _on_idle(self, event: events.Idle) -> None:
        widths = [c.content_width for c in self.columns.values()]
        await super()._on_idle(event)
        if [c.content_width for c in self.columns.values()] != widths:
            self._update_count += 1  # a new line-cache key: no line drawn at the old widths is reused
            self.refresh()
