"""agent/wire.py: the client's JSON lines from the C modules say what json.dumps/json.loads say."""

from __future__ import annotations

import json
import socket
import tempfile
import threading
from pathlib import Path

import pytest

from specdebug.agent import wire

VALUES = [
    {"v": 3, "verb": "status", "argv": ["box", "-c", 'é "quoted"\n'], "tty": [True, False], "x": None},
    {"o": "a line\twith tabs \u2603\n", "rc": 0, "f": 1.5, "big": 10**20},
    ["probe", "-F", "/a b/c"],
    "text",
]


@pytest.mark.parametrize("value", VALUES)
def test_dumps_and_loads_agree_with_json(value: object) -> None:
    assert wire.dumps(value) == json.dumps(value)
    assert wire.loads(json.dumps(value).encode() + b"\n") == value


@pytest.mark.parametrize("bad", [b"", b"{", b'{"o": 1} x', b"nul", b"\xff"])
def test_what_is_not_one_json_value_is_a_value_error(bad: bytes) -> None:
    with pytest.raises(ValueError):
        wire.loads(bad)


def test_dumps_refuses_what_json_refuses() -> None:
    with pytest.raises(TypeError):
        wire.dumps({"path": Path("/")})


def test_readline_splits_replies_and_bounds_a_line() -> None:
    with tempfile.TemporaryDirectory(prefix="sdw-") as folder:
        path = f"{folder}/s"
        server = socket.socket(socket.AF_UNIX)
        server.bind(path)
        server.listen(1)

        def answer() -> None:
            conn, _ = server.accept()
            with conn:
                conn.sendall(b'{"accepted": 1}\n{"o": "x"}')
                conn.sendall(b"\n" + b"y" * 50 + b"\n")

        thread = threading.Thread(target=answer)
        thread.start()
        client = wire.Connection()
        client.settimeout(10)
        client.connect(path)
        assert client.readline(1 << 20) == b'{"accepted": 1}\n'
        assert client.readline(1 << 20) == b'{"o": "x"}\n'
        assert client.readline(20) == b"y" * 20  # at most the limit, as a file's readline(limit)
        assert client.readline(1 << 20) == b"y" * 30 + b"\n"
        assert client.readline(1 << 20) == b""
        client.close()
        thread.join(10)
        server.close()
