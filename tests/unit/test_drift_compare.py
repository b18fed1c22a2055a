"""core.drift.compare: each kind of change named once; current clocks and load never; no snapshot:
cannot tell.  Also the box module's RECORD check and hash cache on a throwaway site dir."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sys

from specdebug.box import drift as box_drift
from specdebug.core.drift.compare import drift_lines

GPU = {
    "index": "0",
    "name": "H200",
    "power.limit": "700.00",
    "clocks.sm": "1980",
    "persistence_mode": "Enabled",
}


def snap(**kw):
    base = {
        "packages": {"torch": "2.5.1"},
        "modified": [],
        "startup_code": [],
        "nccl_conf": [],
        "gpus": [GPU],
    }
    base.update(kw)
    return base


def test_each_change_is_named():
    b = snap(
        packages={"torch": "2.6.0", "flashinfer-python": "0.2.5"},
        modified=[{"package": "sglang", "file": "sglang/srt/x.py", "why": "sha256 differs from RECORD"}],
        startup_code=[
            {"path": "/v/sitecustomize.py", "kind": "sitecustomize", "sha256": "a", "first": "import os"}
        ],
        gpus=[{**GPU, "power.limit": "450.00", "clocks.sm": "345"}],
        cpu_governor={"powersave": 2},
    )
    lines = drift_lines(snap(cpu_governor={"performance": 2}), b)
    assert "sglang/srt/x.py modified (sglang: sha256 differs from RECORD)" in lines
    assert "/v/sitecustomize.py added (sitecustomize: import os)" in lines
    assert "GPU 0 power limit 700 -> 450 W" in lines
    assert "package torch 2.5.1 -> 2.6.0" in lines and "package flashinfer-python 0.2.5 added" in lines
    assert any(x.startswith("CPU governor") for x in lines)
    assert not any("clock" in x for x in lines)
    assert drift_lines(snap(), snap()) == []


def test_missing_snapshot_cannot_tell():
    assert drift_lines(None, snap())[0].startswith("drift: cannot tell (no snapshot with the earlier result")
    assert "boom" in drift_lines(snap(), {"error": "boom"})[0]


def test_record_check_and_cache(tmp_path, monkeypatch):
    site = tmp_path / "site"
    (site / "pkg").mkdir(parents=True)
    text = b"x = 1\n"
    (site / "pkg" / "m.py").write_bytes(text)
    info = site / "pkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Name: pkg\nVersion: 1.0\n\n")
    h = base64.urlsafe_b64encode(hashlib.sha256(text).digest()).rstrip(b"=").decode()
    (info / "RECORD").write_text(f"pkg/m.py,sha256={h},{len(text)}\npkg/gone.py,sha256={h},6\n")
    monkeypatch.setattr(sys, "path", [str(site)])
    monkeypatch.setattr(box_drift, "site_folders", lambda: [])  # the test interpreter's own: not read
    cache = box_drift.HashCache(str(tmp_path / "c.json"), 1 << 20)
    out = box_drift.python_side(cache)
    assert out["packages"] == {"pkg": "1.0"}
    assert out["modified"] == [{"package": "pkg", "file": "pkg/gone.py", "why": "missing"}]
    cache.save()
    again = box_drift.HashCache(str(tmp_path / "c.json"), 1 << 20)
    box_drift.python_side(again)
    assert again.hashed_bytes == 0  # size and mtime unchanged: from the cache
    (site / "pkg" / "m.py").write_bytes(b"x = 2\n")
    os.utime(site / "pkg" / "m.py", ns=(1, 1))
    out = box_drift.python_side(box_drift.HashCache(str(tmp_path / "c.json"), 1 << 20))
    assert {"package": "pkg", "file": "pkg/m.py", "why": "sha256 differs from RECORD"} in out["modified"]
    assert json.loads((tmp_path / "c.json").read_text())


def test_ends_drift_uses_the_latest_snapshot_of_each_end():
    from specdebug.core.drift.report import ends_drift

    good, bad = snap(), snap(gpus=[{**GPU, "power.limit": "450.00"}])
    from specdebug.core.control.records import ServerRecord
    from specdebug.core.records import LaunchRecord

    def launch(fingerprint: str, drift: dict) -> LaunchRecord:
        server = ServerRecord(profile="p", fingerprint=fingerprint, pid=9, pgid=9, port=1, log_file="/l")
        return LaunchRecord(server=server, drift=drift)

    events = [
        launch("g", snap(gpus=[{**GPU, "power.limit": "300.00"}])),
        launch("g", good),
        launch("b", bad),
        launch("b", {"error": "no python"}),
    ]
    assert ends_drift(events, "g", "b") == ["GPU 0 power limit 700 -> 450 W"]
    assert ends_drift(events, "g", "x")[0].startswith("drift between the ends: cannot tell")


def test_cache_file_is_never_under_the_cwd(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert box_drift.cache_file("~/.specdebug/drift-cache.json") == str(
        tmp_path / ".specdebug/drift-cache.json"
    )
    assert box_drift.cache_file("rel/c.json") == str(tmp_path / "rel/c.json")
    assert box_drift.cache_file("") == ""


def test_cache_path_follows_the_state_dir(monkeypatch):
    from types import SimpleNamespace

    from specdebug.core.drift.snapshot import cache_path

    # in a folder of its own (made 0700 by the box module): ~/.specdebug may be shared with a group
    assert cache_path(SimpleNamespace(state_dir="/x/servers")) == "/x/drift/drift-cache.json"
    monkeypatch.setenv("SPECDEBUG_STATE_DIR", "/t/box/servers")
    assert cache_path(SimpleNamespace(state_dir=None)) == "/t/box/drift/drift-cache.json"
    monkeypatch.delenv("SPECDEBUG_STATE_DIR")
    assert cache_path(SimpleNamespace(state_dir=None)) == "~/.specdebug/drift/drift-cache.json"


def test_regenerated_bytecode_is_not_a_modified_installed_file(tmp_path, monkeypatch):
    """Some wheels list their `__pycache__/*.pyc` in RECORD (numpy); the interpreter rewrites them.  The real
    vLLM venv showed numpy's conv_template.cpython-311.pyc as "modified"; an edited .py still is."""
    site = tmp_path / "site"
    (site / "pkg" / "__pycache__").mkdir(parents=True)
    src = b"x = 1\n"
    (site / "pkg" / "m.py").write_bytes(src)
    (site / "pkg" / "__pycache__" / "m.cpython-311.pyc").write_bytes(b"regenerated by another interpreter")
    info = site / "pkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Name: pkg\nVersion: 1.0\n\n")
    h = base64.urlsafe_b64encode(hashlib.sha256(src).digest()).rstrip(b"=").decode()
    (info / "RECORD").write_text(
        f"pkg/m.py,sha256={h},{len(src)}\npkg/__pycache__/m.cpython-311.pyc,sha256={h},{len(src)}\n"
    )
    monkeypatch.setattr(sys, "path", [str(site)])
    monkeypatch.setattr(box_drift, "site_folders", lambda: [])
    out = box_drift.python_side(box_drift.HashCache(str(tmp_path / "c.json"), 1 << 20))
    assert out["modified"] == [] and out["bytecode_skipped"] == 1
    (site / "pkg" / "m.py").write_bytes(b"x = 2\n")
    os.utime(site / "pkg" / "m.py", ns=(1, 1))
    out = box_drift.python_side(box_drift.HashCache(str(tmp_path / "c2.json"), 1 << 20))
    assert [m["file"] for m in out["modified"]] == ["pkg/m.py"]
