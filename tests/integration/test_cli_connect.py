"""Headless verbs fail fast and in one line on a refused port or an unknown name; a changed host
key names the known_hosts file and the exact `ssh-keygen -R` command that fixes it."""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from pathlib import Path

from tests import clifork
from tests.sshd_harness import free_port

# the connect timeout these runs could wait for: failing at once is ending within the run's 120 s
# limit (clifork.run raises past it), far below this, without timing a loaded machine (the goal is
# 2 s idle; interpreter start-up alone takes a good part of a second here)
TIMEOUT_S = 600


def specdebug(*args: str) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.monotonic()
    r = clifork.run(
        [sys.executable, "-m", "specdebug.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    return r, time.monotonic() - t0


def test_refused_port_fails_at_once_in_one_line(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    r, took = specdebug("probe", f"127.0.0.1:{port}", "--json", "--connect-timeout", str(TIMEOUT_S))
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert lines == [
        f"specdebug: 127.0.0.1:{port}: connection refused",
        "specdebug: hint: nothing listens on that SSH port: is sshd running on the box, and is the port "
        "right (HOST:PORT, or Port in the ssh config)?",
    ], r.stderr
    print(f"refused port reported after {took:.1f} s")


def test_refused_alias_names_where_it_connected(tmp_path: Path) -> None:
    port = free_port()
    cfg = tmp_path / "ssh_config"
    cfg.write_text(f"Host gpubox\n  HostName 127.0.0.1\n  Port {port}\n")
    r, took = specdebug("-F", str(cfg), "env", "gpubox", "--pid", "1", "--connect-timeout", str(TIMEOUT_S))
    assert r.returncode == 1
    first, hint = r.stderr.strip().splitlines()
    assert first == f"specdebug: gpubox: connection refused (127.0.0.1 port {port})"
    assert hint.startswith("specdebug: hint: nothing listens on that SSH port")
    print(f"reported after {took:.1f} s")


def test_unknown_host_name_fails_at_once_in_one_line() -> None:
    r, took = specdebug("probe", "nonexistent.invalid", "--connect-timeout", str(TIMEOUT_S))
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("specdebug: nonexistent.invalid: cannot resolve"), r.stderr
    assert lines[0].count("nonexistent.invalid") == 1 and lines[1].startswith("specdebug: hint: ")
    print(f"reported after {took:.1f} s")


def test_changed_host_key_names_file_and_fix(sshd, tmp_path: Path) -> None:
    other = tmp_path / "otherkey"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    kh = tmp_path / "known_hosts"
    kh.write_text(f"[127.0.0.1]:{sshd.port} " + " ".join(Path(f"{other}.pub").read_text().split()[:2]) + "\n")
    cfg = sshd.write_client_config(tmp_path / "ssh_config", kh)
    r, _ = specdebug("probe", "-F", str(cfg), "gpubox")
    assert r.returncode == 1
    assert "HOST KEY CHANGED" in r.stderr and str(kh) in r.stderr
    fix = f"ssh-keygen -R {shlex.quote(f'[127.0.0.1]:{sshd.port}')} -f {shlex.quote(str(kh))}"
    assert f"`{fix}`" in r.stderr, r.stderr
    # the printed command is the fix: after it, the key is unknown (not changed) and can be accepted
    subprocess.run(shlex.split(fix), check=True, capture_output=True)
    r, _ = specdebug("probe", "-F", str(cfg), "gpubox", "--accept-new-host-key", "--json")
    assert r.returncode == 0, r.stderr
