"""Launch a server from a profile and say, the moment it is knowable, whether it came up.

The old way was a 15-second loop of fresh `ssh host curl /health` calls: up to 15 s late when the
server was ready and blind to a crash until the timeout.  Here three watchers run at once and feed
one pure state machine (`StartupTracker`):

* the log, followed from the byte offset it had at launch (`core.logs.follow.Follower`: exact
  offsets, rotation, truncation, resume after a drop): startup phases in order, the ready line,
  error lines (pattern pack from `specdebug.core.logs`); a log that cannot be read is a reason;
* the health endpoint, polled every 0.25 s through an SSH port forward (or from the box itself
  when forwarding is refused);
* the process group's liveness (`remote.processes()` every 0.5 s).

Ready = health 200 and (the kind's ready line seen, unless the profile disables that).  Failed =
an error line (then a short settle window collects the traceback up to its exception line, which
becomes the reason), or the group died, or timeout_s passed (the reason names the last phase).

The server is started detached: `setsid`, stdin from /dev/null, output appended to the log file,
so it lives on when specdebug quits or the connection drops.  The server side of the launch reports
its own PID, group and start time (never a racy process snapshot).  It is stopped by its recorded
process group after the box proved the group is still that one, never by a name (server_control).

Layout: `events` (the typed events, the server state enum), `tracker` (the pure startup state
machine and the ETA history), `monitor` (the pure server-state machine a front end or a bisection
keeps, and its liveness driver), `launch` (start detached, record), `watch` (the three watchers
feeding the tracker).  Callers import from those modules (stop / status / attach: server_control).
"""
