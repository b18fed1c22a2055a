"""Box clients for tests, built the one way the product builds them (a transport under BoxClient).

`ssh_box` is a client of a real sshd (tests/sshd_harness.py); `local_box` makes this machine the box
(LocalTransport: the helper, streams and one-shot ops run here as subprocesses).  No test defines a
Remote stand-in of its own (tests/unit/test_layering.py checks it): they use these, or a shared
fixture built on them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from specdebug.remote.client import BoxClient
from specdebug.transport.local import LocalTransport
from specdebug.transport.ssh.options import SSHOptions
from specdebug.transport.ssh.transport import SSHTransport

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def ssh_box(spec: str, *, state_dir: str | None = None, use_helper: bool = True, **ssh: Any) -> BoxClient:
    """A client of an SSH host (`ssh` are SSHOptions' fields: ssh_config, on_host_key, ...)."""
    return BoxClient(SSHTransport(spec, SSHOptions(**ssh)), state_dir=state_dir, use_helper=use_helper)


def local_env(gpus_csv: Path | None = None, **extra: str) -> dict[str, str]:
    """This machine's environment with the fake nvidia-smi first on PATH (tests/fixtures/bin)."""
    env = dict(os.environ, PATH=f"{FIXTURES / 'bin'}{os.pathsep}{os.environ['PATH']}", **extra)
    if gpus_csv is not None:
        env["SPECDEBUG_FAKE_GPUS"] = str(gpus_csv)
    return env


def local_box(
    name: str = "local",
    *,
    env: Mapping[str, str] | None = None,
    state_dir: str | None = None,
    use_helper: bool = True,
) -> BoxClient:
    """This machine as the box; start it (`await box.wait_connected()`) and close it like any other."""
    return BoxClient(LocalTransport(name, env=env), state_dir=state_dir, use_helper=use_helper)
