"""A DataTable whose lines follow its measured column widths.

Why: `update_cell(..., update_width=True)` measures the column on the table's next idle, but a line
drawn in between is cached under a key without the widths and is shown from that cache until some
other cell changes (Textual issue #3533). On a loaded client the Hosts pane kept a row drawn at the
header's widths, the GPUs cut to "...(1", for as long as the host's facts stayed the same.
"""

from __future__ import annotations

from typing import Any

from textual import events
from textual.widgets import DataTable


class MeasuredTable(DataTable[Any]):
    """DataTable that draws its lines afresh once it has measured updated cells."""

    async def _on_idle(self, event: events.Idle) -> None:
        widths = [c.content_width for c in self.columns.values()]
        await super()._on_idle(event)
        if [c.content_width for c in self.columns.values()] != widths:
            self._update_count += 1  # a new line-cache key: no line drawn at the old widths is reused
            self.refresh()
