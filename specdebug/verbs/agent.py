"""`specdebug agent status|stop`: the local agent that keeps connections warm for verbs (see specdebug.agent).

It tells the truth about the agent of the caller's settings: running (and what it keeps), not
answering (its pid, and why: stopped by a signal, busy), blocked (the folder, and whose it is), or
none; and it names agents of other settings and the settings they differ in.
"""

from __future__ import annotations

import argparse

from specdebug.verbs.common import out, print_json


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("agent")
    p.add_argument("action", choices=("status", "stop"), help="status: what it keeps; stop: end it now")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=agent)


def agent(args: argparse.Namespace) -> int:
    from specdebug.agent.client import inspect

    found = inspect(args.action)
    if args.json:
        found.pop("env", None)  # the agent's settings stay in the agent (their names are in `others`)
        print_json(found)
        return 0
    for line in describe(found, args.action):
        out(line)
    return 0


def describe(found: dict[str, object], action: str) -> list[str]:
    """The lines `agent status|stop` prints for what `inspect` found."""
    state = found.get("state")
    if found.get("running"):
        kept = found.get("hosts")
        hosts = ", ".join(
            f"{h.get('host')} ({h.get('login', '')}{', ' if h.get('login') else ''}{h.get('state')})"
            for h in (kept if isinstance(kept, list) else [])
            if isinstance(h, dict)
        )
        lines = [
            f"agent {'stopping' if action == 'stop' else 'running'}: pid {found.get('pid')}, keeps "
            f"{hosts or 'no host yet'}; idle {found.get('idle_s')} s of {found.get('idle_limit_s')} s"
        ]
    elif state == "not-answering" and action == "stop":
        stopped = "sent TERM (and CONT)" if found.get("stopped") else "could not signal it"
        lines = [f"{found.get('why')}; {stopped} to pid {found.get('pid')}"]
    elif state == "none" and action == "status":
        lines = [
            f"{found.get('why')} (the next probe, status, env, grep, metrics or stacks starts one; --no-agent: never)"
        ]
    else:
        lines = [str(found.get("why"))]
    others = found.get("others")
    for other in others if isinstance(others, list) else []:
        if not isinstance(other, dict):
            continue
        differs = other.get("differs_in")
        about = (
            f"differs in {', '.join(map(str, differs))}"
            if isinstance(differs, list) and differs
            else "does not answer"
            if not other.get("answers")
            else "same settings"
        )
        lines.append(f"  another agent: pid {other.get('pid')} for other settings ({about})")
    return lines
