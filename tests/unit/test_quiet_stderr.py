"""A specdebug process says nothing on stderr that is not the user's business (story: bench --json 2>&1).

cryptography 51 deprecates DSA and asyncssh 2.24 still names it as it is imported: five warnings
on every command's stderr, before specdebug/__init__.py dropped asyncssh's deprecation notices.
"""

from __future__ import annotations

import os
import subprocess
import sys

ASYNCSSH_USERS = "import specdebug.transport.ssh.transport, specdebug.sim.box.loopback_sshd, specdebug.cli"


def run(code: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)


def test_importing_asyncssh_through_specdebug_prints_nothing() -> None:
    r = run(ASYNCSSH_USERS)
    assert r.returncode == 0 and r.stderr == "", r.stderr


def test_other_warnings_still_show() -> None:
    for category in ("UserWarning", "DeprecationWarning"):  # Python shows both from __main__
        r = run(f"import specdebug, warnings; warnings.warn('this option is deprecated', {category})")
        assert f"{category}: this option is deprecated" in r.stderr, (category, r.stderr)
