"""A verb the warm agent answers costs the interpreter and three C modules (_socket, _json, zlib)
(issue 43: "verbs pay only for what they use"): `json`, `socket` and `re` cost 14 ms of imports where
the interpreter starts in 13 ms, so they stay off the path too (agent/wire.py).

`specdebug status ...` imported the verb table (argparse), typing, pathlib and hashlib before it
asked the agent, and `status` was not asked at all: it paid the whole import.  Here a stand-in agent
(a Unix socket of the test's own, in its own XDG_RUNTIME_DIR) answers; the real entry point runs
under `python -X importtime`, and what it imported before printing the answer is read back.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from specdebug.agent.paths import env_fingerprint

# what the warm path may import beyond the interpreter's own start-up
ALLOWED = {
    "specdebug",
    "specdebug.cli",
    "specdebug.agent",
    "__future__",
    "warnings",
    "_socket",
    "_json",
    "zlib",
}
ALLOWED_PREFIXES = ("specdebug.agent.",)
FORBIDDEN = (
    "json",
    "socket",
    "re",
    "selectors",
    "enum",
    "argparse",
    "typing",
    "pathlib",
    "hashlib",
    "specdebug.verbs",
    "asyncssh",
    "shutil",
    "subprocess",
)


def _stand_in_agent(sock_path: str, got: list[dict]) -> tuple[socket.socket, threading.Thread]:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(sock_path)
    server.listen(1)
    server.settimeout(60)

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            got.append(json.loads(conn.makefile("rb").readline()))
            conn.sendall(b'{"accepted": 1}\n{"o": "answered by the agent\\n"}\n{"rc": 0}\n')

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return server, thread


REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "specdebug"  # what pip installs as the `specdebug` command


@pytest.mark.parametrize("entry", [["-m", "specdebug.cli"], [str(SCRIPT)]], ids=["python-m", "command"])
def test_a_warm_status_imports_neither_the_verb_table_nor_typing_nor_pathlib(tmp_path, entry):
    run = Path(tempfile.mkdtemp(prefix="sdf-"))  # short: a socket path fits 108 bytes
    try:
        env = {k: v for k, v in os.environ.items() if k != "SPECDEBUG_NO_AGENT"}
        env["XDG_RUNTIME_DIR"] = str(run)
        folder = run / "specdebug"
        folder.mkdir(mode=0o700)
        got: list[dict] = []
        server, thread = _stand_in_agent(str(folder / f"agent-{env_fingerprint(env)}.sock"), got)
        profile = tmp_path / "p.toml"
        profile.write_text("")
        with server:
            r = subprocess.run(
                [sys.executable, "-X", "importtime", *entry, "status", "box", "-c", "p.toml"],
                capture_output=True,
                text=True,
                timeout=60,
                env=env,
                cwd=tmp_path,
                stdin=subprocess.DEVNULL,
            )
            thread.join(60)
        assert r.returncode == 0 and r.stdout == "answered by the agent\n", r.stderr[-2000:]
        request = got[0]
        assert request["verb"] == "status" and request["argv"] == ["box", "-c", str(profile)]
        assert request["cwd"] == str(tmp_path) and request["tty"] == [False, False]
        names = [line.rsplit("|", 1)[1].strip() for line in r.stderr.splitlines() if "|" in line]
        # the command: everything after the interpreter's start (`site`); python -m: after runpy's own
        start = names.index("site") + 1 if entry == [str(SCRIPT)] else names.index("specdebug")
        imported = names[start:]
        assert not [n for n in imported if n in FORBIDDEN or n.startswith(FORBIDDEN[5:])], imported
        extra = [n for n in imported if n not in ALLOWED and not n.startswith(ALLOWED_PREFIXES)]
        assert extra == [], extra
    finally:
        import shutil

        shutil.rmtree(run, ignore_errors=True)


def test_help_imports_neither_typing_nor_shutil():
    """`--help` < 0.15 s: argparse is needed, what the table and argparse's width lookup pulled is not."""
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "specdebug.cli", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 0 and "probe" in r.stdout
    names = {line.rsplit("|", 1)[1].strip() for line in r.stderr.splitlines() if "|" in line}
    assert not names & {"typing", "shutil", "bz2", "lzma", "pathlib", "socket", "json"}, sorted(names)
