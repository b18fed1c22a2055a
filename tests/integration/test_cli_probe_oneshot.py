"""The one-shot probe path: no resident helper, every file in one exec channel, same facts."""

from __future__ import annotations

import json
import subprocess
import sys

from specdebug.core.hosts import gather_host_info
from tests import clifork
from tests.boxes import ssh_box

PATHS = ["/proc/loadavg", "/proc/sys/kernel/hostname", "/nonexistent/file", "/proc/cpuinfo", "/"]


async def test_files_without_helper_match_the_helper(sshd) -> None:
    with_helper = ssh_box(sshd.alias, ssh_config=sshd.config_path)
    without = ssh_box(sshd.alias, ssh_config=sshd.config_path, use_helper=False)
    try:
        await with_helper.wait_connected(15)
        await without.wait_connected(15)
        a = await with_helper.read_files(PATHS)
        b = await without.read_files(PATHS)
        assert [f.path for f in b] == PATHS
        assert b[1].data == a[1].data and b[1].data.strip()
        assert b[3].data == a[3].data and b"processor" in b[3].data  # a large file, byte for byte
        assert b[2].error == "ENOENT" and b[2].data is None
        assert b[4].error and b[4].data is None  # a directory is not a file
        info = await gather_host_info(without)
        ref = await gather_host_info(with_helper)
        assert (info.hostname, info.kernel, info.cpus, len(info.gpus)) == (
            ref.hostname,
            ref.kernel,
            ref.cpus,
            len(ref.gpus),
        )
    finally:
        await with_helper.close()
        await without.close()


def test_probe_verb_is_one_shot(sshd) -> None:
    r = clifork.run(
        [sys.executable, "-m", "specdebug.cli", "-F", str(sshd.config_path), "probe", "gpubox", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["connected"] and info["hostname"] and info["cpus"] and info["gpus"]
    assert "helper" not in r.stderr  # no "no python3 helper" warning: it was never wanted


def test_probe_reports_a_measured_rtt(sshd) -> None:
    """The RTT is measured before the status says connected: a one-shot probe printed
    `rtt 0.0 ms` and `"rtt_ms": null` (issue 26)."""
    base = [sys.executable, "-m", "specdebug.cli", "-F", str(sshd.config_path), "probe", "gpubox"]
    r = clifork.run([*base, "--json"], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    rtt = json.loads(r.stdout)["rtt_ms"]
    assert isinstance(rtt, float) and rtt > 0
    text = clifork.run(base, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert text.returncode == 0, text.stderr
    head = text.stdout.splitlines()[0]
    assert " rtt " in head and " rtt 0.0 ms" not in head and "rtt unknown" not in head
