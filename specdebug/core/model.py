"""The base of specdebug's pydantic models: each validator is built on first use, not at import.

Why: a verb imports some 80 models and validates a few of them; building every schema when the
modules load cost about 0.1 s of CPU on each command-line run (the suite starts ~500 of them).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Model(BaseModel):
    """pydantic's BaseModel with `defer_build`; a subclass's own model_config merges with it."""

    model_config = ConfigDict(defer_build=True)
