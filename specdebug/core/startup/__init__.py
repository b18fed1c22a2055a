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
feeding the tracker).  This package
re-exports the names callers use, so `specdebug.core.startup.X` keeps working.
"""

from __future__ import annotations

from specdebug.core import server_control
from specdebug.core.server_control import LaunchRefused, ServerStatus, StopResult
from specdebug.core.servers import ServerRecord, find_port_holder
from specdebug.core.startup.events import (
    NOTHING_RUNNING,
    Clock,
    ConnectionNote,
    GroupChange,
    HealthChange,
    Launched,
    LogLine,
    LogProblem,
    ServerPhase,
    ServerState,
    StartupEvent,
    Verdict,
)
from specdebug.core.startup.launch import (
    LAUNCH_REPORT,
    LAUNCH_SCRIPT,
    LAUNCH_VAR,
    Started,
    check_can_launch,
    launch,
    launch_argv,
    launch_env,
    parse_launch_report,
    start_detached,
)
from specdebug.core.startup.monitor import ServerMonitor, StateChanged, watch_liveness
from specdebug.core.startup.tracker import (
    EXC_LINE_RE,
    EXCERPT_BEFORE,
    EXCERPT_MAX,
    TRACEBACK_RE,
    StartupHistory,
    StartupTracker,
    startup_history,
)
from specdebug.core.startup.watch import _clean_line, launch_and_watch, watch
from specdebug.remote.api import ConnectionDropped, RemoteError

# stop / status / attach live in server_control (every signal sent by specdebug is decided there)
stop = server_control.stop
stop_record = server_control.stop_record
status = server_control.status
liveness = server_control.liveness
attach = server_control.attach
__all__ = [
    "EXCERPT_BEFORE",
    "EXCERPT_MAX",
    "EXC_LINE_RE",
    "LAUNCH_REPORT",
    "LAUNCH_SCRIPT",
    "LAUNCH_VAR",
    "TRACEBACK_RE",
    "Clock",
    "ConnectionDropped",
    "GroupChange",
    "HealthChange",
    "LaunchRefused",
    "Launched",
    "LogLine",
    "ConnectionNote",
    "LogProblem",
    "NOTHING_RUNNING",
    "RemoteError",
    "ServerPhase",
    "ServerRecord",
    "ServerState",
    "ServerMonitor",
    "ServerStatus",
    "Started",
    "StartupEvent",
    "StartupHistory",
    "StartupTracker",
    "StateChanged",
    "StopResult",
    "Verdict",
    "_clean_line",
    "attach",
    "check_can_launch",
    "find_port_holder",
    "launch",
    "launch_and_watch",
    "launch_argv",
    "launch_env",
    "liveness",
    "parse_launch_report",
    "start_detached",
    "startup_history",
    "status",
    "stop",
    "stop_record",
    "watch",
    "watch_liveness",
]
