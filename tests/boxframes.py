"""Reading the resident helper's framed lines in tests that speak to it over its pipes directly.

Every line the helper writes starts with its frame marker (specdebug/box/helper.py: FRAME); the first
framed line may tell the helper's own PID (`{"spawned": PID}`) before the greeting.
"""

from __future__ import annotations

import json
from typing import IO, Any

FRAME = b"@@specdebug@@"


def read_frame(stream: IO[bytes]) -> dict[str, Any]:
    """The next framed JSON object (other output and the `spawned` notice skipped)."""
    while True:
        line = stream.readline()
        if not line:
            raise EOFError("the helper ended")
        if not line.startswith(FRAME):
            continue
        obj = json.loads(line[len(FRAME) :])
        if set(obj) == {"spawned"}:
            continue
        return dict(obj)
