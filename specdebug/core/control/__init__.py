"""A server's lifecycle in one place: launch it, say the moment it is knowable whether it came up,
watch it live, stop it, and find its workers.

The old way was a 15-second loop of fresh `ssh host curl /health` calls: up to 15 s late when the
server was ready and blind to a crash until the timeout.  Here three watchers run at once and feed
one pure state machine (`StartupTracker`):

* the log, followed from the byte offset it had at launch (`core.logs.follow.Follower`: exact
  offsets, rotation, truncation, resume after a drop): startup phases in order, the ready line,
  error lines (the engine's pattern pack); a log that cannot be read is a reason;
* the health endpoint, polled every 0.25 s through a port forward (or from the box itself when
  the transport has no forward);
* the process group's liveness (`remote.processes()` every 0.5 s).

Ready = health 200 and (the kind's ready line seen, unless the profile disables that).  Failed =
an error line (then a short settle window collects the traceback up to its exception line, which
becomes the reason), or the group died (then the rest of the log is read directly), or timeout_s
passed (the reason names the last phase).

The server is started detached: `setsid`, stdin from /dev/null, output appended to the log file,
so it lives on when specdebug quits or the connection drops.  The server side of the launch reports
its own PID, group and start time (never a racy process snapshot).  It is stopped by its recorded
process group after the box proved the group is still that one, never by a name (`actions`).

Layout: `records` (what specdebug remembers about a server, and what the box says of it now),
`launch` (start detached, record), `events` (the typed events, the server state enum), `tracker`
(the pure startup state machine and the ETA history), `watch` (the three watchers feeding the
tracker), `monitor` (the pure server-state machine a front end or a bisection keeps, and its
liveness driver), `actions` (stop, status, attach: only on a proven group), `workers` (a server's
worker processes), `observe` (what a read-only seat does instead of attaching).
"""
