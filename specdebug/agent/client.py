"""The verb side of the agent: send argv to a running agent, print what it answers (stdlib only).

Imported by `cli.py` for every verb the agent serves, before anything else (not even the verb table):
when an agent answers, the process imports the C modules `_socket`, `_json` and `zlib` and nothing of
specdebug but this module, agent/paths.py and agent/wire.py (no json, socket or re: their imports
cost more than the interpreter's start; no pathlib, no argparse; `python -X importtime` shows it,
tests/unit/test_agent_fastpath.py holds it).  The agent
parses the argv with the verb's own parser and says when a request needs this process (a local
file, --follow): then the verb runs here, without a note.  When none runs, the verb takes the direct path in this
process and an agent is started in the background for the next verbs (as the first `ssh` does with
ControlMaster/ControlPersist).  Anything unexpected (no safe folder, a refused or dead socket, an agent
of other code) also means the direct path, never an error of its own.

Every wait is bounded: the agent must accept a request within `handshake_s()` (a stopped agent's socket
still accepts connections: the kernel queues them) and say something (its output, or that it is alive,
every ALIVE_S) at least every QUIET_S while the verb runs.  When it does not, the verb runs directly,
after one line on stderr saying why.  An agent of other code or another interpreter is replaced.
"""

from __future__ import annotations

import os
import sys

from specdebug.agent import AGENT_VERBS
from specdebug.agent.paths import (
    caller_env,
    caller_identity,
    env_fingerprint,
    pid_name,
    runtime_folder,
    socket_name,
)
from specdebug.agent.wire import Connection, dumps, loads

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy takes the name as True)

if TYPE_CHECKING:
    from pathlib import Path
    from typing import TextIO

PROTOCOL = 3
__all__ = ["AGENT_VERBS", "try_run"]
# options whose value is a local path: made absolute here, since the agent runs in another folder
PATH_OPTIONS = frozenset({"-F", "--ssh-config", "-c", "--profile"})
MAX_REPLY_LINE = 8 << 20
DEFAULT_HANDSHAKE_S = 3.0  # an idle agent accepts in milliseconds; this is for a loaded machine
ALIVE_S = 1.0  # the agent says it is alive this often while a verb runs
QUIET_S = 10.0  # ... and is taken for stuck after this long without a line


def handshake_s() -> float:
    """How long a verb waits for the agent to accept it (SPECDEBUG_AGENT_WAIT_S)."""
    try:
        value = float(os.environ.get("SPECDEBUG_AGENT_WAIT_S", DEFAULT_HANDSHAKE_S))
    except ValueError:
        return DEFAULT_HANDSHAKE_S
    return value if 0 < value < 3600 else DEFAULT_HANDSHAKE_S


def disabled(argv: list[str]) -> bool:
    if "--no-agent" in argv or "-h" in argv or "--help" in argv:
        return True
    return os.environ.get("SPECDEBUG_NO_AGENT", "").lower() in ("1", "true", "yes", "on")


def _here(value: str, cwd: str) -> str:
    """A path option's value as the agent must read it: a relative path to a file here made absolute;
    anything else as typed (`-c baseline` names an example profile; a missing file fails in the same
    words in the agent, whose folder holds only its sockets)."""
    if os.path.isabs(value) or value.startswith("~"):
        return value
    joined = os.path.join(cwd, value)
    return joined if os.path.exists(joined) else value


def absolute_paths(argv: list[str], cwd: str) -> list[str]:
    """argv with the values of path options (to files here) made absolute against the caller's folder."""
    fixed: list[str] = []
    take = False
    for tok in argv:
        if take:
            fixed.append(_here(tok, cwd))
            take = False
            continue
        name, eq, value = tok.partition("=")
        if name in PATH_OPTIONS and eq and value:
            fixed.append(f"{name}={_here(value, cwd)}")
        elif tok in PATH_OPTIONS:
            fixed.append(tok)
            take = True
        else:
            fixed.append(tok)
    return fixed


def note(text: str, stderr: TextIO | None = None) -> None:
    """One line on stderr: why this verb did not go through the agent."""
    stream = stderr or sys.stderr
    stream.write(f"specdebug: {text}\n")
    stream.flush()


def try_run(
    verb: str, argv: list[str], stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int | None:
    """The verb's exit code when an agent ran it; None: run it directly (an agent may be starting)."""
    if verb not in AGENT_VERBS or disabled(argv):
        return None
    folder = runtime_folder()
    if folder is None:
        return None  # `agent status` says why
    fingerprint = env_fingerprint()
    sock_path = socket_name(folder, fingerprint)
    if sock_path is None:
        return None
    cwd = os.getcwd()
    argv = absolute_paths(argv, cwd)
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    sock = Connection()
    wait = handshake_s()
    try:
        sock.settimeout(min(1.0, wait))
        try:
            sock.connect(sock_path)
        except (FileNotFoundError, ConnectionRefusedError):
            start_agent(sock_path, verb, argv)  # none runs: the next verb finds one
            return None
        except OSError as exc:
            note(f"the agent's socket did not take the request ({_why(exc)}); {_direct(sock_path)}", stderr)
            return None
        request = {
            "v": PROTOCOL,
            "verb": verb,
            "argv": argv,
            "cwd": cwd,
            "tty": [_isatty(stdout), _isatty(stderr)],
            "env": caller_env(),
            "fingerprint": fingerprint,
            "identity": caller_identity(),
        }
        sock.settimeout(wait)
        sock.send(request)
        try:
            first = loads(sock.readline(MAX_REPLY_LINE) or b"null")
        except TimeoutError:
            note(f"the agent did not answer within {wait:g} s; {_direct(sock_path)}", stderr)
            return None
        except ValueError:
            first = None
        if isinstance(first, dict) and first.get("direct"):
            return None  # the request needs this process (a local file, --follow): no note
        if not isinstance(first, dict) or not first.get("accepted"):
            _refused(first, sock_path, verb, argv, stderr)
            return None
        sock.settimeout(QUIET_S)
        return _relay(sock, stdout, stderr, sock_path, verb, argv)
    except OSError as exc:
        note(f"the agent's connection failed ({_why(exc)}); {_direct(sock_path)}", stderr)
        return None
    finally:
        sock.close()


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def _why(exc: OSError) -> str:
    return "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))


def _direct(sock_path: str) -> str:
    """The end of a note: what runs instead and where to look."""
    pid = agent_pid(sock_path)
    who = f"agent pid {pid}: {process_state(pid)}" if pid else "no agent process"
    return f"running directly ({who}; `specdebug agent status` says more)"


def _refused(reply: object, sock_path: str, verb: str, argv: list[str], stderr: TextIO | None) -> None:
    """An agent that refused: one of other code is replaced (it stops itself; an agent of an older
    protocol is asked to), one with other settings is left alone; either way this verb runs directly."""
    why = reply.get("why") if isinstance(reply, dict) else None
    replace = reply.get("replace", True) if isinstance(reply, dict) else True
    if replace:
        if not (isinstance(reply, dict) and reply.get("stopping")):
            _ask(sock_path, "stop", handshake_s())
        start_agent(sock_path, verb, argv)
        note(f"replaced the agent ({why or 'an older protocol'}); running directly this time", stderr)
    else:
        note(f"the agent refused the request ({why or 'no reason given'}); running directly", stderr)


def _relay(
    replies: Connection, stdout: TextIO, stderr: TextIO, sock_path: str, verb: str, argv: list[str]
) -> int | None:
    """Print the agent's output as it comes; None when it ended (or went quiet) before saying anything,
    or found (beside the verb, before showing anything) that it runs other code: it is replaced."""
    said = False
    try:
        for raw in iter(lambda: replies.readline(MAX_REPLY_LINE), b""):
            try:
                reply = loads(raw)
            except ValueError:
                break
            if not isinstance(reply, dict) or "alive" in reply:
                continue
            if "refused" in reply and not said:
                _refused(reply, sock_path, verb, argv, stderr)
                return None
            if "rc" in reply:
                return int(reply["rc"])
            stream = stdout if "o" in reply else stderr
            stream.write(str(reply.get("o", reply.get("e", ""))))
            stream.flush()
            said = True
    except TimeoutError:
        if not said:
            note(
                f"the agent went quiet for {QUIET_S:g} s while running the verb; {_direct(sock_path)}", stderr
            )
            return None
        note(
            f"the agent went quiet for {QUIET_S:g} s in the middle of the verb; run it again with --no-agent",
            stderr,
        )
        return 1
    if said:
        note("the agent ended before the verb finished; run it again with --no-agent", stderr)
        return 1
    note(f"the agent ended without an answer; {_direct(sock_path)}", stderr)
    return None


def agent_pid(sock_path: Path | str) -> int | None:
    """The pid the agent of this socket wrote (it holds its pid file's lock while it lives)."""
    try:
        with open(pid_name(str(sock_path))) as pid_file:
            text = pid_file.read().strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None


def process_state(pid: int) -> str:
    """A few words on what process `pid` is doing, from /proc (Linux); a stopped one says so."""
    try:
        with open(f"/proc/{pid}/stat") as stat_file:
            stat_line = stat_file.read()
    except OSError:
        return "gone" if not _alive(pid) else "running"
    state = stat_line.rsplit(")", 1)[-1].split()[0] if ")" in stat_line else "?"
    return {
        "T": "stopped by a signal (kill -STOP or Ctrl+Z)",
        "t": "stopped by a debugger",
        "Z": "ended (a zombie)",
        "D": "waiting on the disk",
    }.get(state, "running")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _ask(sock_path: Path | str, what: str, timeout: float) -> dict[str, object] | None:
    """One control request (status, stop) to the agent at `sock_path`; None when it does not answer."""
    sock = Connection()
    try:
        sock.settimeout(timeout)
        sock.connect(str(sock_path))
        sock.send({"v": PROTOCOL, "control": what})
        reply = loads(sock.readline(MAX_REPLY_LINE) or b"null")
    except (OSError, ValueError):
        return None
    finally:
        sock.close()
    return reply if isinstance(reply, dict) else None


def control(what: str) -> dict[str, object] | None:
    """Ask this environment's agent for its status (or to stop); None when no agent answers."""
    from specdebug.agent.paths import runtime_dir, socket_path

    folder = runtime_dir(create=False)
    sock_path = socket_path(folder) if folder is not None else None
    return _ask(sock_path, what, handshake_s()) if sock_path is not None else None


def inspect(what: str = "status") -> dict[str, object]:
    """The truth about this environment's agent for `agent status|stop`: running (and what it keeps),
    not answering (its pid and why: stopped, busy), blocked (the folder, and by whom), or none; plus
    agents of other settings in the folder and the settings they differ in."""
    from specdebug.agent.paths import agent_folder, folder_problem, socket_path

    folder = agent_folder()
    problem = folder_problem(folder)
    if problem is not None:
        if not folder.exists() and not folder.is_symlink():
            return {"running": False, "state": "none", "why": "no agent has run for this user yet"}
        return {
            "running": False,
            "state": "blocked",
            "folder": str(folder),
            "why": f"no agent can run: {problem}; every verb connects directly",
        }
    sock_path = socket_path(folder)
    if sock_path is None:
        return {
            "running": False,
            "state": "blocked",
            "folder": str(folder),
            "why": f"no agent can run: the socket path in {folder} is too long for a Unix socket "
            "(set XDG_RUNTIME_DIR to a shorter folder)",
        }
    reply = _ask(sock_path, what, handshake_s())
    others = _other_agents(folder, sock_path)
    if reply is not None:
        return {
            "running": True,
            "state": "stopping" if what == "stop" else "running",
            **reply,
            "others": others,
        }
    pid = agent_pid(sock_path)
    if pid is not None and _is_our_agent(pid, sock_path):
        state = process_state(pid)
        found: dict[str, object] = {
            "running": False,
            "state": "not-answering",
            "pid": pid,
            "socket": str(sock_path),
            "why": f"agent pid {pid} does not answer within {handshake_s():g} s: {state}; verbs wait "
            f"{handshake_s():g} s for it, then connect directly",
            "others": others,
        }
        if what == "stop":
            found["stopped"] = _end(pid)
            found["state"] = "stopping"
        return found
    why = "no agent runs for these settings"
    if others:
        why += f"; {len(others)} other agent(s) run for other settings"
    return {"running": False, "state": "none", "why": why, "others": others}


def _is_our_agent(pid: int, sock_path: Path) -> bool:
    """Whether `pid` is this user's agent for `sock_path` (a pid file can outlive its process)."""
    try:
        st = os.stat(f"/proc/{pid}")
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline_file:
            cmdline = cmdline_file.read().split(b"\0")
    except OSError:
        return False
    return st.st_uid == os.getuid() and b"specdebug.agent" in cmdline and str(sock_path).encode() in cmdline


def _end(pid: int) -> bool:
    """End an agent that does not answer (TERM, then CONT so a stopped one receives it)."""
    import signal

    try:
        os.kill(pid, signal.SIGTERM)
        os.kill(pid, signal.SIGCONT)
    except OSError:
        return False
    return True


def _other_agents(folder: Path, mine: Path) -> list[dict[str, object]]:
    """Agents in the folder for other settings: pid, and the names of the settings they differ in."""
    from specdebug.agent.paths import env_differences

    found: list[dict[str, object]] = []
    env = caller_env()
    for sock in sorted(folder.glob("agent-*.sock")):
        if sock == mine:
            continue
        reply = _ask(sock, "status", min(1.0, handshake_s()))
        entry: dict[str, object] = {"socket": str(sock), "pid": agent_pid(sock), "answers": reply is not None}
        theirs = reply.get("env") if reply is not None else None
        if isinstance(theirs, dict):
            entry["differs_in"] = env_differences(env, {str(k): str(v) for k, v in theirs.items()})
        found.append(entry)
    return found


def start_agent(sock_path: Path | str, verb: str, argv: list[str]) -> None:
    """Start an agent for this socket in the background (its own session, no terminal, nothing printed);
    it opens the connection this verb needs at once, so the next verb finds it warm.  The verb and its
    arguments reach it on its stdin, never on its command line (which every local user can read)."""
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "SPECDEBUG_NO_AGENT"}
    try:
        child = subprocess.Popen(
            [sys.executable, "-m", "specdebug.agent", "--socket", str(sock_path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=os.path.dirname(str(sock_path)),  # relative paths it is sent find none of the caller's files
            env=env,
            start_new_session=True,
            close_fds=True,
        )
    except OSError:
        return
    assert child.stdin is not None
    try:
        child.stdin.write(
            dumps({"warm": [verb, *argv], "after": os.getpid()}).encode() + b"\n"
        )  # far below a pipe's buffer
        child.stdin.close()
    except OSError:
        pass
