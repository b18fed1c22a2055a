"""Server engines as adapters: the one home of what specdebug knows about SGLang and vLLM.

Below the services (core may import engines; engines import nothing of core, remote, tui, verbs or
sim).  `get_engine(kind)` is the way in; `ENGINE_NAMES` are the profile kinds with an engine (a
profile's `custom` kind has none: no pack, no phases beyond launch and ready).  Modules: base (the
Engine protocol), pack + primitives (the log pattern machinery), sglang_pack / vllm_pack (the
patterns), sglang / vllm (the engines), envrules (env rule vocabulary), detect (which engine wrote
a log).

Adding an engine: a module with a class that satisfies `base.Engine` (mypy checks it where ENGINES
is built), its name in `base.EngineName` (the profile's `kind` Literal follows), its instance below.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import get_args

from specdebug.engines import sglang, vllm
from specdebug.engines.base import Engine, EngineName
from specdebug.engines.envrules import EnvRule
from specdebug.engines.pack import Pack

ENGINES: dict[str, Engine] = {e.name: e for e in (sglang.ENGINE, vllm.ENGINE)}
ENGINE_NAMES: tuple[EngineName, ...] = get_args(EngineName)  # == tuple(ENGINES) (tests/unit/test_engines.py)
DEFAULT_ENGINE: EngineName = "sglang"  # a profile without `kind`
PACKS: dict[str, Pack] = {name: e.pack for name, e in ENGINES.items()}
PACK_NAMES = ("auto", *PACKS)
NO_ENGINE_PHASES = ("launch", "ready")  # a custom server: launched, then ready

__all__ = [
    "DEFAULT_ENGINE",
    "ENGINES",
    "ENGINE_NAMES",
    "NO_ENGINE_PHASES",
    "PACKS",
    "PACK_NAMES",
    "Engine",
    "EngineName",
    "engine_of",
    "get_engine",
    "get_pack",
    "server_env_rules",
    "worker_match",
]


def get_engine(name: str) -> Engine:
    """The engine of a kind; ValueError naming the choices for any other name."""
    try:
        return ENGINES[name]
    except KeyError:
        raise ValueError(f"unknown engine {name!r} (choose from {', '.join(ENGINE_NAMES)})") from None


def engine_of(kind: str | None) -> Engine | None:
    """The engine of a profile kind, None for `custom`, None or an unknown name."""
    return ENGINES.get(kind) if kind else None


def get_pack(name: str) -> Pack:
    try:
        return PACKS[name]
    except KeyError:
        raise ValueError(f"unknown pattern pack {name!r} (choose from {', '.join(PACK_NAMES)})") from None


def server_env_rules(
    kind: str | None, version: str | None = None, argv: Sequence[str] = ()
) -> dict[str, EnvRule]:
    """What one server does to its workers' environment; {} for kinds without an engine."""
    engine = engine_of(kind)
    return engine.env_rules(version, argv) if engine is not None else {}


def worker_match() -> str:
    """A regex over cmdlines that picks every engine's worker processes (the env pane's default)."""
    return "^(" + "|".join(e.worker_match for e in ENGINES.values()) + ")"
