"""In a pairing session, a journaled action names the seat that typed it, not the driver.

One app serves every seat, so before every event was the driver's (a watcher's benchmark was
logged as the driver's).  tmux knows which client typed last and whose it is; the journal records
it as `seat`.  Real users, real tmux, the app against the real sshd; a mark (Logs pane, `m`) is the
journaled action, typed once by a read-write seat and once by the driver.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import time
from pathlib import Path

import pytest

from specdebug.core.pair.owner import user_name
from tests.pair_harness import Terminal, can_make_users, pair_cli, shared_root, tmux, unix_users, wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(can_make_users() is not None, reason=str(can_make_users())),
]


def screen(sock: str, name: str) -> str:
    return tmux(sock, "capture-pane", "-p", "-t", f"={name}:").stdout


def marks(session: Path) -> list[dict]:
    path = session / "events.jsonl"
    if not path.exists():
        return []
    return [e for e in map(json.loads, path.read_text().splitlines()) if e.get("kind") == "mark"]


def test_marks_name_the_seat_that_typed_them(sshd, tmp_path: Path) -> None:
    with unix_users(1) as (writer,), shared_root() as root:
        name = f"a{secrets.token_hex(3)}"
        session = tmp_path / "session"
        res = pair_cli(
            root, "-F", str(sshd.config_path), "gpubox",
            "--name", name, "--detach", "--json", "--allow", writer, "--session", str(session),
        )  # fmt: skip
        assert res.returncode == 0, res.stderr
        info = json.loads(res.stdout)
        sock = info["socket"]
        terms: list[Terminal] = []
        try:
            driver = Terminal(["tmux", "-S", sock, "attach-session", "-t", f"={name}:"], size=(150, 45))
            terms.append(driver)
            wait_for(lambda: "gpubox" in (s := screen(sock, name)) and "pairing" in s, 90, what="app up")
            seat = Terminal(shlex.split(info["seats"][0]["join"]), user=writer, size=(150, 45))
            terms.append(seat)
            wait_for(lambda: f"{writer} rw ● attached" in screen(sock, name), 30, what="the seat shown")

            time.sleep(1.1)  # tmux keeps client activity in whole seconds
            seat.type("3")
            wait_for(lambda: "Logs" in screen(sock, name), 15, what="the Logs pane")
            seat.type("m")
            wait_for(lambda: len(marks(session)) == 1, 20, what="the seat's mark journaled")
            time.sleep(1.1)
            driver.type("m")
            wait_for(lambda: len(marks(session)) == 2, 20, what="the driver's mark journaled")
            assert [m.get("seat") for m in marks(session)] == [writer, user_name(os.getuid())]
        finally:
            for term in terms:
                term.close()
            tmux(sock, "kill-server")
