"""The verb side of the agent: send argv to a running agent, print what it answers (stdlib only).

Imported by `cli.py` for every verb the agent serves, before anything heavy: when an agent answers,
the verb never imports asyncssh at all.  When none runs, the verb takes the direct path in this
process and an agent is started in the background for the next verbs (as the first `ssh` does with
ControlMaster/ControlPersist).  Anything unexpected (no safe folder, a refused or dead socket, an agent
of an older protocol) also means the direct path, never an error of its own.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import TextIO

from specdebug.agent.paths import env_fingerprint, runtime_dir, socket_path

PROTOCOL = 1
# verbs the agent runs; each is read-only on the box and reads no stdin
AGENT_VERBS = frozenset({"probe"})
# options whose value is a local path: made absolute here, since the agent runs in another folder
PATH_OPTIONS = frozenset({"-F", "--ssh-config", "-c", "--profile"})
MAX_REPLY_LINE = 8 << 20


def disabled(argv: list[str]) -> bool:
    if "--no-agent" in argv or "-h" in argv or "--help" in argv:
        return True
    return os.environ.get("SPECDEBUG_NO_AGENT", "").lower() in ("1", "true", "yes", "on")


def absolute_paths(argv: list[str], cwd: str) -> list[str]:
    """argv with the values of path options made absolute against the caller's folder."""
    fixed: list[str] = []
    take = False
    for tok in argv:
        if take:
            fixed.append(tok if os.path.isabs(tok) else os.path.join(cwd, os.path.expanduser(tok)))
            take = False
            continue
        name, eq, value = tok.partition("=")
        if name in PATH_OPTIONS and eq and value:
            fixed.append(
                f"{name}={value if os.path.isabs(value) else os.path.join(cwd, os.path.expanduser(value))}"
            )
        elif tok in PATH_OPTIONS:
            fixed.append(tok)
            take = True
        else:
            fixed.append(tok)
    return fixed


def try_run(
    verb: str, argv: list[str], stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int | None:
    """The verb's exit code when an agent ran it; None: run it directly (an agent may be starting)."""
    if verb not in AGENT_VERBS or disabled(argv):
        return None
    folder = runtime_dir()
    if folder is None:
        return None
    fingerprint = env_fingerprint()
    sock_path = socket_path(folder, fingerprint)
    if sock_path is None:
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(1.0)
        sock.connect(str(sock_path))
    except OSError:
        sock.close()
        start_agent(sock_path, verb, absolute_paths(argv, os.getcwd()))
        return None
    request = {"v": PROTOCOL, "verb": verb, "argv": absolute_paths(argv, os.getcwd()), "env": fingerprint}
    try:
        sock.settimeout(None)  # the verb's own timeouts bound it (connect timeout, request timeouts)
        sock.sendall(json.dumps(request).encode() + b"\n")
        return _relay(sock.makefile("rb"), stdout or sys.stdout, stderr or sys.stderr)
    except OSError:
        return None
    finally:
        sock.close()


def _relay(replies, stdout: TextIO, stderr: TextIO) -> int | None:
    """Print the agent's output as it comes; None when it ended before saying anything."""
    said = False
    for raw in iter(lambda: replies.readline(MAX_REPLY_LINE), b""):
        try:
            reply = json.loads(raw)
        except ValueError:
            break
        if "rc" in reply:
            return int(reply["rc"])
        if reply.get("refused"):
            return None if not said else 1
        stream = stdout if "o" in reply else stderr
        stream.write(str(reply.get("o", reply.get("e", ""))))
        stream.flush()
        said = True
    if said:
        stderr.write("specdebug: the agent ended before the verb finished; run it again with --no-agent\n")
        return 1
    return None


def control(what: str) -> dict[str, object] | None:
    """Ask this environment's agent for its status (or to stop); None when no agent answers."""
    folder = runtime_dir(create=False)
    sock_path = socket_path(folder) if folder is not None else None
    if sock_path is None:
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(5.0)
        sock.connect(str(sock_path))
        sock.sendall(json.dumps({"v": PROTOCOL, "control": what}).encode() + b"\n")
        reply = json.loads(sock.makefile("rb").readline(MAX_REPLY_LINE) or b"null")
    except (OSError, ValueError):
        return None
    finally:
        sock.close()
    return reply if isinstance(reply, dict) else None


def start_agent(sock_path: Path, verb: str, argv: list[str]) -> None:
    """Start an agent for this socket in the background (its own session, no terminal, nothing printed);
    it opens the connection this verb needs at once, so the next verb finds it warm."""
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "SPECDEBUG_NO_AGENT"}
    try:
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "specdebug.agent",
                "--socket",
                str(sock_path),
                "--warm",
                json.dumps([verb, *argv]),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd="/",
            env=env,
            start_new_session=True,
            close_fds=True,
        )
    except OSError:
        pass
