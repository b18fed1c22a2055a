"""Which GPUs two servers may share, from CUDA_VISIBLE_DEVICES as recorded (core.control.neighbours):
lists that do not meet share nothing; a server naming none sees every GPU, so it *may* share."""

from __future__ import annotations

from specdebug.core.control.neighbours import shared_gpus, visible_gpus


def test_cuda_visible_devices_decides_and_says_its_source() -> None:
    assert visible_gpus({}) is None and visible_gpus({"CUDA_VISIBLE_DEVICES": " "}) is None
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "0, 1"}) == ["0", "1"]
    assert shared_gpus(["0", "1"], ["2", "3"], "it") is None  # no warning for GPUs apart
    held = shared_gpus(["1", "2"], ["0", "1"], "it")
    assert held == "holds GPU 1 (CUDA_VISIBLE_DEVICES=0,1; this launch: 1,2)"
    assert "neither sets CUDA_VISIBLE_DEVICES" in (shared_gpus(None, None, "it") or "")
    assert (shared_gpus(["3"], None, "it") or "").startswith("may hold the GPUs this launch uses (it sets no")
    assert "this launch sets no" in (shared_gpus(None, ["3"], "it") or "")
