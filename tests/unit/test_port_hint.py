"""The port a taken-port refusal suggests (box/ports.py) and the hint's words (core.profiles.ports):
the login's $SPECDEBUG_SIM_PORTS block first, skipping ports someone listens on; an example profile
is to be copied, not edited (issue 41: two users of a box start from the same examples)."""

from __future__ import annotations

import socket

from specdebug.box import ports
from specdebug.core.profiles import load_profile
from specdebug.core.profiles.ports import is_example, port_change_hint
from specdebug.resources import profile_path


def test_the_suggestion_skips_listening_ports_of_the_block(monkeypatch) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        monkeypatch.setenv(ports.PORTS_VAR, f"{taken}-{taken + 50}")
        free, source = ports.free_port_for(31000)
        assert source == ports.PORTS_VAR and taken < free < taken + 50
        monkeypatch.setenv(ports.PORTS_VAR, f"{taken}-{taken + 1}")  # a block with nothing free
        free, source = ports.free_port_for(taken)
        assert source == "above" and free is not None and free > taken
        monkeypatch.delenv(ports.PORTS_VAR)
        assert ports.free_port_for(taken)[1] == "above"
        assert ports.op_port_holder({"port": taken})["free"] is not None
        assert ports.op_port_holder({"port": taken})["listening"] is True


def test_an_example_is_copied_a_file_of_ones_own_is_changed(tmp_path) -> None:
    example = load_profile(profile_path("baseline"))
    assert is_example(example.source)
    hint = port_change_hint(example, 10042, "SPECDEBUG_SIM_PORTS")
    assert "baseline is an example" in hint
    assert "`specdebug profile check baseline > baseline-mine.toml`" in hint
    assert "change `--port 31000` in [server] argv and `port = 31000` in the copy" in hint
    assert "10042 is free on the box now (this login's $SPECDEBUG_SIM_PORTS block)" in hint
    own = tmp_path / "mine.toml"
    own.write_text('name = "mine"\n[server]\nargv = ["python3", "-m", "sglang.launch_server"]\n')
    mine = load_profile(own)
    assert not is_example(mine.source)
    hint = port_change_hint(mine, 30001, "above")
    assert hint.startswith("to use another port, add `--port NEW` to [server] argv and set `port = NEW`")
    assert f"in {own} to a free one: 30001 is free on the box now (or in a copy" in hint
