"""`specdebug probe`'s text prints GPU memory in GiB as the TUI's Hosts pane does, and an unreported
reading as `?` (issue 41: `mem 1.0/143771.0 MiB` beside the TUI's GiB, `None W`)."""

from __future__ import annotations

import pytest

from specdebug.core.hosts import GpuInfo, HostInfo
from specdebug.verbs.probe import _print_text


def test_probe_text_gpu_memory_in_gib_and_unknown_as_question_mark(
    capsys: pytest.CaptureFixture[str],
) -> None:
    gpu = GpuInfo(
        index=0,
        name="NVIDIA H200",
        utilization_pct=0.0,
        memory_used_mib=1.0,
        memory_total_mib=143771.0,
        temperature_c=31.0,
        power_draw_w=None,
        clocks_sm_mhz=345.0,
        clocks_max_sm_mhz=1980.0,
    )
    _print_text(HostInfo(host="box", connected=True, hostname="h", cpus=2, gpus=[gpu]))
    line = capsys.readouterr().out.splitlines()[1]
    assert "mem 0.0/140.4 GiB" in line and "MiB" not in line, line
    assert "? W" in line and "None" not in line and "sm 345/1980 MHz" in line, line
