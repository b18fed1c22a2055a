"""Shipping the box-side modules (specdebug.box) to the box as source, and the op bundle.

Why source: a box needs nothing installed; what runs there is exactly the file in this package
(read from the installed package, so a wheel works as well as a checkout).  The resident helper
and the one-shot fallback run the same bundle: the helper module plus the op modules, each
executed as its own module namespace on the box.
"""

from __future__ import annotations

import base64
import json
import zlib
from functools import cache
from importlib import resources
from typing import Any

from specdebug.remote.api import RemoteError, RunResult
from specdebug.remote.shell import sh_join

# box modules whose OPS the helper serves (and the one-shot fallback answers)
OP_MODULES = ("procctl", "ports", "health")


@cache
def source(name: str) -> str:
    """The text of one file of specdebug/box (`helper.py`, `launch.sh`, ...)."""
    return resources.files("specdebug.box").joinpath(name).read_text(encoding="utf-8")


def _bundle(call: str) -> str:
    """Python text that loads helper.py and the op modules as modules, then runs `call`."""
    parts = [
        "import types",
        "def _load(name, text):",
        "    m = types.ModuleType('specdebug_box_' + name)",
        "    exec(compile(text, '<specdebug.box.' + name + '>', 'exec'), m.__dict__)",
        "    return m",
        f"_helper = _load('helper', {source('helper.py')!r})",
        "_ops = [" + ", ".join(f"_load({n!r}, {source(n + '.py')!r}).OPS" for n in OP_MODULES) + "]",
        call,
    ]
    return "\n".join(parts) + "\n"


@cache
def helper_command() -> str:
    """The resident helper's command line: python3 -c with the bundle compressed (short in `ps`).

    The boot text carries procctl.HELPER_MARK, by which process control recognizes (and never
    signals) a helper's group."""
    packed = base64.b64encode(zlib.compress(_bundle("_helper.serve(_ops)").encode(), 9)).decode()
    boot = f"import base64,zlib;exec(zlib.decompress(base64.b64decode('{packed}')))"
    return sh_join(["python3", "-u", "-c", boot])


@cache
def _once_boot() -> str:
    packed = base64.b85encode(
        zlib.compress(_bundle("_helper.run_once(_ops, __import__('sys').argv[1])").encode(), 9)
    )
    return f"exec(__import__('zlib').decompress(__import__('base64').b85decode('{packed.decode()}')))"


def once_argv(op: str) -> list[str]:
    """argv answering one op without a resident helper (its args go on stdin as JSON)."""
    return ["python3", "-c", _once_boot(), op]


def once_reply(op: str, res: RunResult) -> dict[str, Any]:
    """The result of a one-shot op (once_argv), or RemoteError saying why there is none."""
    if not res.ok:
        why = (res.err or res.out).strip()[:300] or f"exit status {res.exit_status}"
        raise RemoteError(f"box operation {op} failed: {why}")
    try:
        reply = json.loads(res.stdout)
    except ValueError as exc:
        raise RemoteError(f"box operation {op} answered {res.out.strip()[:200]!r}") from exc
    if not isinstance(reply, dict) or not reply.get("ok") or not isinstance(reply.get("result"), dict):
        raise RemoteError(
            f"box operation {op} failed: {reply.get('error') if isinstance(reply, dict) else reply}"
        )
    result: dict[str, Any] = reply["result"]
    return result


def python_argv(name: str, *args: str, flags: tuple[str, ...] = ()) -> list[str]:
    """argv running one box module's source as a script: python3 FLAGS -c SOURCE ARGS..."""
    return ["python3", *flags, "-c", source(name), *args]
