"""A hostile box over the real sshd: OSC 52 / OSC 0 / CSI / C1 / bidi in log lines, in a process's
cmdline and environ, in a server's startup excerpt and in the journal.  Every text verb (grep,
scan --events, env, status, launch --wait, history, report) shows them as visible escapes and
never sends them to the terminal; JSON keeps them exact (escaped by json).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.security.boxkit import assert_terminal_safe, forget_server, run, unique, write_profile
from tests.sshd_harness import free_port

pytestmark = pytest.mark.slow

OSC52 = "\x1b]52;c;ZWNobyBwd25lZA==\x07"
TITLE = "\x1b]0;pwned title\x07"
CSI = "\x1b[2J\x1b[H"
C1 = "\x9b6n\x9d0;c1 title\x9c"
BIDI = "\u202eevil\u202c\u2066x\u2069"
HOSTILE = f"{OSC52}{TITLE}{CSI}{C1}{BIDI}"

LOG_LINES = [
    f"[2025-06-01 10:00:00] server_args=ServerArgs(model_path='m{HOSTILE}', port=30000)",
    f"[2025-06-01 10:00:01 TP0] Decode batch. #running-req: 1, #token: 100, token usage: 0.01, "
    f"accept len: 2.50, gen throughput (token/s): 95.00, #queue-req: 0, {HOSTILE}",
    f"[2025-06-01 10:00:02 TP0] hello {HOSTILE} world",
    f"[2025-06-01 10:00:03 TP0] Scheduler hit an exception: Traceback {TITLE}",
    f"RuntimeError: boom {OSC52}",
]

# listens on a port (so `status` finds it as the port's holder) and sleeps; argv and env are hostile
HOLDER = (
    "import socket, sys, time\n"
    "s = socket.socket()\n"
    "s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(1)\n"
    "print('ready', flush=True)\n"
    "time.sleep(300)\n"
)
# prints hostile lines like a crashing server, then dies: launch --wait shows the excerpt
CRASHER = (
    "import sys\n"
    "H = sys.argv[1]\n"
    "print('[2025-06-01 10:00:00] server_args=ServerArgs(model_path=\"m\")', flush=True)\n"
    "print('[2025-06-01 10:00:01 TP0] Load weight begin. ' + H, flush=True)\n"
    "print('[2025-06-01 10:00:02 TP0] Scheduler hit an exception: Traceback (most recent call last):', flush=True)\n"
    "print('  File \"x.py\", line 1, in <module> ' + H, flush=True)\n"
    "print('RuntimeError: boom ' + H, flush=True)\n"
    "sys.exit(1)\n"
)


@pytest.fixture
def holder(tmp_path: Path):
    """A process of ours with hostile cmdline and environ, listening on a free port."""
    port = free_port()
    env = {**os.environ, "HOSTILE_VALUE": HOSTILE, "HOSTILE_PLAIN": "x"}
    proc = subprocess.Popen(
        # the script comes last so the hostile argument is within the shown start of the cmdline
        [sys.executable, "-c", "exec(__import__('sys').argv[-1])", str(port), f"--t={HOSTILE}\nfake", HOLDER],
        env=env,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    yield proc, port
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)


def test_every_text_verb_shows_controls_visibly(sshd, tmp_path: Path, holder) -> None:
    proc, port = holder
    log = tmp_path / "hostile.log"
    log.write_bytes(("\n".join(LOG_LINES) + "\n").encode() + b"raw bytes \x9b\xff\x1b]0;t\x07 hello\n")
    session = tmp_path / "session"
    outputs: dict[str, bytes] = {}

    def check(name: str, res: subprocess.CompletedProcess, codes=(0,)) -> str:
        assert res.returncode in codes, (name, res.returncode, res.stderr.decode(errors="replace"))
        assert_terminal_safe(res.stderr, f"{name} (stderr)")
        outputs[name] = res.stdout
        return assert_terminal_safe(res.stdout, name)

    text = check("grep", run(sshd, "grep", f"gpubox:{log}", "-e", "hello|Decode"))
    assert "\\x1b]52;c;" in text and "\\u202e" in text and "\\x9b" in text  # shown, not dropped

    text = check("scan --events", run(sshd, "scan", f"gpubox:{log}", "--events", "--pack", "sglang"))
    assert "error" in text

    check("scan", run(sshd, "scan", f"gpubox:{log}", "--pack", "sglang"))

    text = check(
        "env", run(sshd, "env", "gpubox", "--pid", str(proc.pid), "--prefix", "HOSTILE"), codes=(0, 1)
    )
    assert "HOSTILE_VALUE" in text and "\\x1b]52" in text

    # status of a profile whose port the hostile process holds: the holder's cmdline is shown
    status_profile = write_profile(
        tmp_path / "status.toml",
        unique("hostile-status"),
        {"argv": ["true"], "port": port, "log_file": str(tmp_path / "status.log")},
    )
    text = check("status", run(sshd, "status", "gpubox", "-c", str(status_profile)), codes=(1,))
    assert f"port {port} is in use" in text and "\\x1b]52" in text
    assert len(text.splitlines()) == 1  # a newline inside the box's text does not fake a second line

    # launch --wait of a server that crashes printing hostile lines: the excerpt is shown safely
    name = unique("hostile-crash")
    crash_profile = write_profile(
        tmp_path / "crash.toml",
        name,
        {
            "argv": [sys.executable, "-c", CRASHER, HOSTILE],
            "port": free_port(),
            "log_file": str(tmp_path / "crash.log"),
        },
        ready={"timeout_s": 60},
    )
    try:
        res = run(sshd, "launch", "gpubox", "-c", str(crash_profile), "--wait", "--session", str(session))
        text = check("launch --wait", res, codes=(1,))
        assert "log excerpt" in text and "\\x1b]52" in text
        res = run(
            sshd, "launch", "gpubox", "-c", str(crash_profile), "--wait", "--json", "--session", str(session)
        )
        assert res.returncode == 1
        verdict = json.loads(res.stdout)
        assert any(OSC52 in line for line in verdict["excerpt"])  # JSON: exact, json-escaped
    finally:
        forget_server(name)

    # the journal now holds the hostile excerpt; a hostile mark too
    check("mark", run(sshd, "mark", f"note {HOSTILE}", "--session", str(session)))
    text = check("report", run(sshd, "report", "--session", str(session)))
    assert "\\x1b]0;pwned" in text
    check("history", run(sshd, "history", "--session", str(session)))
    report = tmp_path / "report.md"
    check("report -o", run(sshd, "report", "--session", str(session), "-o", str(report)))
    assert_terminal_safe(report.read_bytes(), "report file")
    assert set(outputs) >= {"grep", "scan --events", "env", "status", "launch --wait", "report", "history"}


def test_json_output_stays_exact(sshd, tmp_path: Path) -> None:
    log = tmp_path / "hostile.log"
    log.write_text("\n".join(LOG_LINES) + "\n")
    res = run(sshd, "grep", f"gpubox:{log}", "-e", "hello", "--json")
    assert res.returncode == 0, res.stderr
    assert b"\x1b" not in res.stdout  # json.dumps escapes it ...
    lines = [json.loads(x)["line"] for x in res.stdout.splitlines()]
    assert lines == [
        LOG_LINES[2].replace(CSI, "")
    ]  # ... and the value is the line (CSI colour codes dropped)
