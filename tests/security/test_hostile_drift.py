"""Drift on a hostile venv, over the real loopback sshd: every read bounded, nothing of the venv run.

The server's interpreter is a throwaway venv of the test's own.  Its site-packages holds a package
whose RECORD names a FIFO (the old snapshot opened it and waited 120 s for a writer, and every
`launch --wait` and `bench` with it), a .pth whose `import` line prints a line and leaves a marker
file (the old snapshot imported `site`, so it ran at every snapshot and its line broke the JSON
reply), and a sitecustomize.py leaving a marker too.  The hash cache must be 0600 in a 0700 folder
and the old 0644 cache beside the server records is removed.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

from tests.security.boxkit import run, unique, write_profile

DRIFT_BOUND_S = 40.0  # the old code: 120 s (its own timeout), then "not JSON" (the JSON asserts catch it)


def hostile_venv(root: Path) -> tuple[Path, Path]:
    """(the venv's python, its site-packages) with a FIFO in a RECORD, a loud .pth, a sitecustomize."""
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = next((venv / "lib").glob("python3*/site-packages"))
    pkg, info = site / "trappy", site / "trappy-1.0.dist-info"
    pkg.mkdir()
    info.mkdir()
    (pkg / "__init__.py").write_text("x = 1\n")
    os.mkfifo(pkg / "_native.so")
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: trappy\nVersion: 1.0\n\n")
    (info / "RECORD").write_text(
        "trappy/__init__.py,sha256=nia_NpkRxFwkPGhBR7I_yeHc_PJX0pmhxjIBam_NM_Q,6\n"
        "trappy/_native.so,sha256=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA,\n"
        "trappy-1.0.dist-info/RECORD,,\n"
    )
    ran = root / "ran"
    (site / "loud.pth").write_text(
        f"import sys; print('pth says hi'); open({str(ran / 'pth')!r}, 'w').close()\n"
    )
    (site / "sitecustomize.py").write_text(f"open({str(ran / 'sitecustomize')!r}, 'w').close()\n")
    ran.mkdir()
    return venv / "bin" / "python", site


def test_fifo_pth_and_sitecustomize_neither_hang_nor_run(sshd, tmp_path: Path) -> None:
    python, site = hostile_venv(tmp_path)
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    stale = home / "drift-cache.json"  # where the old code kept it, world-readable
    stale.write_text("{}")
    stale.chmod(0o644)
    name = unique("drifty")
    profile = write_profile(
        tmp_path / "p.toml",
        name,
        {"argv": [str(python), "-m", "http.server"], "log_file": str(tmp_path / "l")},
    )
    t0 = time.monotonic()
    res = run(
        sshd,
        "drift",
        "gpubox",
        "-c",
        str(profile),
        "--json",
        timeout=DRIFT_BOUND_S + 60,
        env={"SPECDEBUG_STATE_DIR": str(home / "servers")},
    )
    took = time.monotonic() - t0
    assert res.returncode == 0, res.stderr.decode()
    snap = json.loads(res.stdout)
    print(f"drift on the hostile venv: {took:.2f} s wall, box module {snap['took_s']} s")
    assert snap["packages"]["trappy"] == "1.0"
    fifo = str(site / "trappy" / "_native.so")
    assert any(s["path"] == fifo and "FIFO" in s["why"] for s in snap["skipped"]), snap["skipped"]
    assert any(m["file"] == "trappy/_native.so" and "FIFO" in m["why"] for m in snap["modified"]), snap[
        "modified"
    ]
    assert list((tmp_path / "ran").iterdir()) == [], "start-up code ran during the snapshot"
    listed = {c["path"]: c for c in snap["startup_code"]}
    assert str(site / "loud.pth") in listed and str(site / "sitecustomize.py") in listed
    assert "not run" in snap["python"]["site"]

    cache = home / "drift" / "drift-cache.json"
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600
    assert stat.S_IMODE(cache.parent.stat().st_mode) == 0o700
    assert not stale.exists(), "the old world-readable cache is left in place"

    human = run(
        sshd,
        "drift",
        "gpubox",
        "-c",
        str(profile),
        timeout=DRIFT_BOUND_S + 60,
        env={"SPECDEBUG_STATE_DIR": str(home / "servers")},
    )
    text = human.stdout.decode()
    assert human.returncode == 0 and f"skipped {fifo}: a FIFO, not read" in text, text


def test_stray_output_of_the_interpreter_is_skipped_and_said(sshd, tmp_path: Path) -> None:
    """A python3 wrapper that prints a banner before the interpreter starts: the reply still reads."""
    wrapper = tmp_path / "python-banner"
    wrapper.write_text(f"#!/bin/sh\necho 'conda says hello'\nexec {sys.executable} \"$@\"\n")
    wrapper.chmod(0o755)
    name = unique("chatty")
    profile = write_profile(
        tmp_path / "p.toml",
        name,
        {"argv": [str(wrapper), "-m", "http.server"], "log_file": str(tmp_path / "l")},
    )
    res = run(
        sshd,
        "drift",
        "gpubox",
        "-c",
        str(profile),
        "--json",
        timeout=DRIFT_BOUND_S + 60,
        env={"SPECDEBUG_STATE_DIR": str(tmp_path / "servers")},
    )
    assert res.returncode == 0, res.stderr.decode()
    snap = json.loads(res.stdout)
    assert any("conda says hello" in e for e in snap["errors"]), snap["errors"]


def _venv_with_pth(root: Path, pth: str) -> tuple[Path, Path]:
    """(the venv's python, its site-packages) with one .pth holding `pth` and nothing else hostile."""
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "zz.pth").write_text(pth)
    return venv / "bin" / "python", site


def _drift_json(sshd, tmp_path: Path, python: Path) -> tuple[subprocess.CompletedProcess, float]:
    profile = write_profile(
        tmp_path / "p.toml",
        unique("pth"),
        {"argv": [str(python), "-m", "http.server"], "log_file": str(tmp_path / "l")},
    )
    t0 = time.monotonic()
    res = run(
        sshd, "drift", "gpubox", "-c", str(profile), "--json", timeout=DRIFT_BOUND_S + 60,
        env={"SPECDEBUG_STATE_DIR": str(tmp_path / "servers")},
    )  # fmt: skip
    return res, time.monotonic() - t0


def test_a_pth_that_prints_one_line_leaves_the_snapshot_whole(sshd, tmp_path: Path) -> None:
    """Only a .pth whose import line prints (no FIFO): the old snapshot imported `site`, the line
    went to stdout before the JSON reply, and drift failed with "not JSON"."""
    python, site = _venv_with_pth(tmp_path, "import sys; print('pth says hi')\n")
    res, took = _drift_json(sshd, tmp_path, python)
    print(f"drift beside a printing .pth: exit {res.returncode} after {took:.2f} s")
    assert res.returncode == 0, res.stderr.decode()
    snap = json.loads(res.stdout)
    assert not any("not JSON" in e for e in snap["errors"]), snap["errors"]
    assert str(site / "zz.pth") in {c["path"] for c in snap["startup_code"]}, snap["startup_code"]
    assert snap["python"]["version"], snap["python"]


def test_a_pth_that_runs_code_is_listed_not_run(sshd, tmp_path: Path) -> None:
    """Only a quiet .pth that runs code (leaves a marker file): the old snapshot ran it, with the box
    user's rights, at every drift, launch and bench.  Now it is listed as start-up code, not run."""
    marker = tmp_path / "pth-ran"
    python, site = _venv_with_pth(tmp_path, f"import os; open({str(marker)!r}, 'w').close()\n")
    res, took = _drift_json(sshd, tmp_path, python)
    print(f"drift beside a .pth that runs code: exit {res.returncode} after {took:.2f} s")
    assert res.returncode == 0, res.stderr.decode()
    assert not marker.exists(), "the .pth's code ran during the drift snapshot"
    snap = json.loads(res.stdout)
    assert str(site / "zz.pth") in {c["path"] for c in snap["startup_code"]}, snap["startup_code"]
    assert "not run" in snap["python"]["site"], snap["python"]


def test_bench_beside_a_fifo_in_a_record_is_not_held_by_the_snapshot(sshd, tmp_path: Path) -> None:
    """`bench` takes a drift snapshot under the profile's interpreter beside its run: the old one
    waited 120 s on the FIFO before the first request.  The server is a short one of the test's
    (tests/security/hostile_http.py, a plain 3-token stream); only the drift interpreter is hostile."""
    python, _site = hostile_venv(tmp_path)
    root = Path(__file__).resolve().parents[2]
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.security.hostile_http", "plain"],
        stdout=subprocess.PIPE, start_new_session=True, cwd=root,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        profile = write_profile(
            tmp_path / "bench.toml",
            unique("fifobench"),
            {
                "argv": [str(python), "-m", "sglang.launch_server"],
                "port": port,
                "log_file": str(tmp_path / "l"),
            },
            ready={"health": "/health", "require_ready_line": False},
            bench={"requests": 2, "output_len": 4, "input_len": 8, "warmup_requests": 0, "timeout_s": 30},
        )
        t0 = time.monotonic()
        res = run(
            sshd, "bench", "gpubox", "-c", str(profile), "--json", timeout=DRIFT_BOUND_S + 120,
            env={"SPECDEBUG_STATE_DIR": str(tmp_path / "servers")},
        )  # fmt: skip
        took = time.monotonic() - t0
        print(f"bench beside a FIFO in a RECORD: exit {res.returncode} after {took:.2f} s")
        assert res.returncode == 0, res.stderr.decode()[-2000:]
        result = json.loads(res.stdout)
        skipped = (result.get("drift") or {}).get("skipped") or []
        assert any("FIFO" in s["why"] for s in skipped), result.get("drift")
    finally:
        server.kill()
        server.wait()


def test_a_file_too_slow_to_hash_is_skipped_within_its_budget(sshd, tmp_path: Path) -> None:
    """A RECORD naming a 64 GiB (sparse) source file: sources are hashed whatever the byte budget, so
    the old snapshot read all of it (its 120 s timeout, then no snapshot).  Now one file's hash stops
    at its own time bound (box/drift.py FILE_TIME_S) and the file is named as skipped."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "huge").mkdir()
    big = site / "huge" / "__init__.py"
    with open(big, "wb") as fh:
        fh.truncate(64 << 30)
    info = site / "huge-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: huge\nVersion: 1.0\n\n")
    (info / "RECORD").write_text(
        "huge/__init__.py,sha256=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA,68719476736\n"
        "huge-1.0.dist-info/RECORD,,\n"
    )
    res, took = _drift_json(sshd, tmp_path, venv / "bin" / "python")
    print(f"drift beside a 64 GiB source file: exit {res.returncode} after {took:.2f} s")
    assert res.returncode == 0, res.stderr.decode()
    snap = json.loads(res.stdout)
    assert any(s["path"] == str(big) and "hashing took over" in s["why"] for s in snap["skipped"]), snap[
        "skipped"
    ]


def test_the_hash_cache_is_0600_in_a_0700_folder(sshd, tmp_path: Path) -> None:
    """A plain venv: the old cache was ~/.specdebug/drift-cache.json, 0644 in a 0755 folder (every
    hashed path of the user's venvs readable by other users of the box)."""
    python, site = _venv_with_pth(tmp_path, "\n")
    (site / "tiny").mkdir()
    (site / "tiny" / "__init__.py").write_text("x = 1\n")  # one file to hash, so a cache is written
    (site / "tiny-1.0.dist-info").mkdir()
    (site / "tiny-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: tiny\nVersion: 1.0\n\n"
    )
    (site / "tiny-1.0.dist-info" / "RECORD").write_text(
        "tiny/__init__.py,sha256=nia_NpkRxFwkPGhBR7I_yeHc_PJX0pmhxjIBam_NM_Q,6\n"
    )
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    profile = write_profile(
        tmp_path / "p.toml",
        unique("cache"),
        {"argv": [str(python), "-m", "http.server"], "log_file": str(tmp_path / "l")},
    )
    res = run(
        sshd, "drift", "gpubox", "-c", str(profile), "--json", timeout=DRIFT_BOUND_S + 60,
        env={"SPECDEBUG_STATE_DIR": str(home / "servers")},
    )  # fmt: skip
    assert res.returncode == 0, res.stderr.decode()
    caches = [p for p in home.rglob("*cache*") if p.is_file()]
    print(
        f"drift caches: {[(str(p.relative_to(home)), oct(stat.S_IMODE(p.stat().st_mode))) for p in caches]}"
    )
    assert caches, "no hash cache written"
    for cache in caches:
        assert stat.S_IMODE(cache.stat().st_mode) == 0o600, cache
        assert stat.S_IMODE(cache.parent.stat().st_mode) == 0o700, cache.parent
