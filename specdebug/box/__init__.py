"""Code that runs ON THE BOX, kept as real modules so linters, mypy and unit tests reach it.

Everything here runs under the box's own python3 (or sh, for the `.sh` files), never under the
client's interpreter: stdlib only, Python >= 3.7 (`from __future__ import annotations` keeps the
annotations strict for mypy without evaluating them on an old box), no import of specdebug or of
anything third-party (tests/unit/test_layering.py checks it).  The client ships each file as source
(specdebug.remote.boxcode reads it from the installed package), so a box needs nothing installed.

    helper.py          the resident probe helper (framed JSON lines on one channel); hosts the ops below
    proclist.py        the process table for its ps op (per-PID cache)
    procctl.py         identity-checked process-group signals and the server records (state files)
    ports.py           who listens on a TCP port (/proc/net/tcp + /proc/*/fd)
    health.py          GET http://127.0.0.1:PORT/PATH from the box itself
    journal_append.py  a shared journal: one whole line appended (O_APPEND, fsync), or read, checked
    follow.py          the log follow agent (exact offsets, rotation, truncation, prefilter)
    follow_flow.py     its acknowledged flow control (a slow reader leaves the rest in the file)
    launch.sh          detached server launch (setsid) that reports the server's own identity
    launch_report.sh   the server side of that launch (runs after setsid, then execs the server)
    read_files.sh      reads files without python3 (the helper-less fallback)
    step_hold.sh       a Slurm job step that runs launch.sh and lasts as long as its server
"""
