"""The local agent: one process per user that keeps SSH connections and box helpers warm for verbs.

Why: a headless verb pays Python start-up, asyncssh's imports, the SSH handshake and the helper's
start on the box every time, which made `specdebug probe --json` slower than a plain `ssh box cat`.
OpenSSH answers the same problem with ControlMaster; this is ours: the first verb runs directly and
starts the agent in the background, later verbs send their argv over a Unix socket (0600, in a 0700
folder the user owns, peer uid checked) and the agent runs the same verb code on a kept connection.
`--no-agent` (or SPECDEBUG_NO_AGENT=1) takes the direct path; the agent ends after an idle time.
"""

# verbs the agent runs; each is read-only on the box and reads no stdin (the agent runs grep without
# --follow, metrics without --watch, stacks without --record/--save/--compare; the rest run directly).
# Here, so that cli.py can tell an agent verb from the rest before importing anything.
AGENT_VERBS = frozenset({"probe", "status", "env", "grep", "metrics", "stacks"})
