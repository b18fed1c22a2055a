"""`specdebug agent status|stop`: the local agent that keeps connections warm for verbs (see specdebug.agent)."""

from __future__ import annotations

import argparse

from specdebug.verbs.common import out, print_json


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("agent")
    p.add_argument("action", choices=("status", "stop"), help="status: what it keeps; stop: end it now")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=agent)


def agent(args: argparse.Namespace) -> int:
    from specdebug.agent.client import control

    reply = control(args.action)
    if args.json:
        print_json({"running": reply is not None, **(reply or {})})
        return 0
    if reply is None:
        out("no agent runs for this environment (the next probe starts one; --no-agent: never)")
        return 0
    verb = "stopping" if args.action == "stop" else "running"
    kept = reply.get("hosts")
    hosts = (
        ", ".join(f"{h['host']} ({h['state']})" for h in kept if isinstance(h, dict))
        if isinstance(kept, list)
        else ""
    )
    hosts = hosts or "no host yet"
    out(
        f"agent {verb}: pid {reply.get('pid')}, keeps {hosts}; idle {reply.get('idle_s')} s "
        f"of {reply.get('idle_limit_s')} s"
    )
    return 0
