"""Importing the SSH layer starts no process (asyncssh's library look-ups are answered from folders)."""

from __future__ import annotations

import subprocess
import sys

from specdebug.transport.ssh.libsearch import find_in_folders

SPY = """
import subprocess
started = []
real = subprocess.Popen.__init__
def spy(self, args, *a, **k):
    started.append(args)
    return real(self, args, *a, **k)
subprocess.Popen.__init__ = spy
import specdebug.transport.ssh.transport, specdebug.remote.factory
print(started)
"""


def test_importing_the_ssh_layer_runs_no_subprocess():
    r = subprocess.run([sys.executable, "-c", SPY], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_a_library_is_found_by_its_soname_in_the_loader_path(tmp_path, monkeypatch):
    for name in ("libsdfake.so", "libsdfake.so.3", "libsdfake.so.3.1"):
        (tmp_path / name).write_bytes(b"")
    monkeypatch.setenv("LD_LIBRARY_PATH", str(tmp_path))
    assert find_in_folders("sdfake") == "libsdfake.so.3"
    assert find_in_folders("libsdfake") == "libsdfake.so.3"
    assert find_in_folders("sdnothere") is None
