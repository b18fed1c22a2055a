"""Our nvidia-smi parser on output captured from a real H200 box (tests/fixtures/nvidia-smi/README.md)."""

from __future__ import annotations

from pathlib import Path

from specdebug.core.hosts import parse_nvidia_smi

FIX = Path(__file__).parent.parent / "fixtures" / "nvidia-smi"


def test_idle_h200_is_idle_not_throttled():
    (gpu,) = parse_nvidia_smi((FIX / "h200-idle.csv").read_text())
    assert gpu.name == "NVIDIA H200" and gpu.memory_total_mib == 143771
    assert gpu.clocks_sm_mhz == 345 and gpu.clocks_max_sm_mhz == 1980
    assert gpu.throttle_reasons == ["gpu_idle"] and not gpu.throttled


def test_loaded_h200_at_power_cap_is_throttled():
    (gpu,) = parse_nvidia_smi((FIX / "h200-load-powercap.csv").read_text())
    assert gpu.utilization_pct == 100 and gpu.power_draw_w == 685.79
    assert gpu.throttle_reasons == ["sw_power_cap"] and gpu.throttled


def test_header_with_units_is_skipped_not_misread():
    gpus = parse_nvidia_smi((FIX / "h200-idle-header-units.csv").read_text())
    assert [g.index for g in gpus] == [0]  # the header line names clocks.current.sm [MHz], not a GPU
