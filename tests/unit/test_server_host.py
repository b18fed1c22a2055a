"""Where a server answers on its box (issue 41: a loopback node bound to 127.0.0.3 with `--host` was
health-checked at 127.0.0.1, timed out "health not answering", and the leader stayed "starting")."""

from __future__ import annotations

from specdebug.core.control.records import ServerRecord
from specdebug.core.fingerprint import server_host, url_host


def test_the_host_flag_names_where_the_server_answers() -> None:
    assert server_host(["python3", "-m", "sglang.launch_server", "--port", "1"]) == "127.0.0.1"
    assert server_host(["x", "--host", "127.0.0.3", "--port", "1"]) == "127.0.0.3"
    assert server_host(["x", "--host=127.0.0.2"]) == "127.0.0.2"
    assert server_host(["x", "--host", "127.0.0.2", "--host", "127.0.0.3"]) == "127.0.0.3"  # the last wins
    for anywhere in ("0.0.0.0", "::", "localhost"):
        assert server_host(["vllm", "serve", "m", "--host", anywhere]) == "127.0.0.1"
    assert server_host(["x", "--host", "::1"]) == "::1" and url_host("::1") == "[::1]"
    record = ServerRecord(
        profile="p", pid=2, pgid=2, port=1, log_file="/l", argv=["x", "--host", "127.0.0.3"]
    )
    assert record.listen_host == "127.0.0.3"
