"""The resident probe helper, run locally: framing and leaving on its own when nobody talks."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

from tests.boxframes import read_frame

HELPER = Path(__file__).resolve().parents[2] / "specdebug" / "box" / "helper.py"


def start(**env: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", HELPER.read_text()],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, **env},
    )


def test_output_with_newlines_and_braces_stays_inside_one_frame():
    p = start()
    try:
        assert read_frame(p.stdout)["hello"] == "specdebug-helper"
        req = {"id": 7, "op": "run", "argv": ["printf", '}\\n{"id": 1}\\n'], "timeout": 10}
        p.stdin.write((json.dumps(req) + "\n").encode())
        p.stdin.flush()
        resp = read_frame(p.stdout)
        assert resp["id"] == 7 and resp["rc"] == 0
        assert base64.b64decode(resp["out"]) == b'}\n{"id": 1}\n'
    finally:
        p.kill()


def test_helper_leaves_when_idle_after_a_silent_network_drop():
    p = start(SPECDEBUG_HELPER_IDLE_S="0.5")
    assert p.wait(60) == 0  # stdin stays open (sshd never noticed the drop), yet it exits
