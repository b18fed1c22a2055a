"""The terminal driver: Textual's LinuxDriver, resumed only after a suspend (Ctrl+Z).

Why: LinuxDriver restarts application mode on every SIGCONT, and the kernel sends SIGCONT along
with SIGHUP whenever the terminal hangs up (the window closed, tmux killed, ssh dropped).  That
started a second input thread on the dead terminal, reading EOF in a loop at 100% CPU, and the
process never exited (the thread is not a daemon): a demo whose pane closed while it stopped its
server spun until it was killed.  Here SIGCONT resumes only a driver that was suspended and whose
terminal is still there, and once the app has closed the driver the process's SIGTSTP/SIGCONT go
back to their defaults.

A hangup does not always bring a signal: the kernel sends SIGHUP to the terminal's session leader,
and to the foreground group only when that leader exits, so an app whose shell ended first, or that
ignores SIGHUP (nohup), saw its terminal vanish with no signal at all.  It then spun at 100% CPU
(the input thread reads EOF in a loop), or hung for good (the output thread died on EIO and the
next write waited on its full queue).  So the driver watches its terminal: output to a dead one is
dropped, and a terminal that stops being one ends the app as `q` would.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

from textual.driver import Driver
from textual.drivers import linux_driver
from textual.drivers._writer_thread import WriterThread
from textual.drivers.linux_driver import LinuxDriver

WATCH_S = 1.0  # how often the driver asks whether its terminal is still there (one ioctl)
HANGUP_EXIT_CODE = 128 + signal.SIGHUP  # what a shell reports for a process ended by SIGHUP
# set once a driver saw its terminal gone: the process leaves with HANGUP_EXIT_CODE and prints nothing,
# whatever the app's own return code says by then (an error while it closed, beside 8 busy loops, made
# it 1, and the goodbye lines printed to the dead terminal raised EIO)
terminal_hung_up = threading.Event()


class HangupSafeWriter(WriterThread):
    """Textual's output thread, which keeps emptying its queue after the terminal answers EIO:
    a dead thread would leave the app's next write (or its exit) waiting on a full queue forever."""

    def run(self) -> None:
        try:
            super().run()
        except OSError:  # the terminal hung up: nothing more can be shown, nobody may block
            while self._queue.get() is not None:
                pass


@contextlib.contextmanager
def _writer_class(cls: type[WriterThread]) -> Iterator[None]:
    """LinuxDriver builds its writer inside start_application_mode: have it build ours."""
    before = linux_driver.WriterThread
    linux_driver.WriterThread = cls  # type: ignore[misc]
    try:
        yield
    finally:
        linux_driver.WriterThread = before  # type: ignore[misc]


class TerminalDriver(LinuxDriver):
    """LinuxDriver that a hangup's SIGCONT does not restart."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._suspended = False
        self._watching: threading.Event | None = None  # set to stop the terminal watch

    def start_application_mode(self) -> None:
        with _writer_class(HangupSafeWriter):
            super().start_application_mode()  # type: ignore[no-untyped-call]
        self._watching = threading.Event()
        loop = asyncio.get_running_loop()
        threading.Thread(
            target=self._watch_terminal, args=(self._watching, loop), name="specdebug-tty-watch", daemon=True
        ).start()

    def stop_application_mode(self) -> None:
        if self._watching is not None:
            self._watching.set()
        super().stop_application_mode()

    def _watch_terminal(self, stop: threading.Event, loop: asyncio.AbstractEventLoop) -> None:
        """Until application mode ends: a terminal that is gone ends the app as `q` would."""
        while not stop.wait(WATCH_S):
            if not terminal_alive(self.fileno):
                terminal_hung_up.set()
                with contextlib.suppress(RuntimeError):  # the loop already closed: the app is leaving
                    loop.call_soon_threadsafe(self._app.exit, None, HANGUP_EXIT_CODE)
                return

    def suspend_application_mode(self) -> None:
        self._suspended = True  # before close(), which the suspend calls
        super().suspend_application_mode()

    def resume_application_mode(self) -> None:
        self._suspended = False
        super().resume_application_mode()

    def _sigcont_application(self, *_: Any) -> None:
        if self._suspended and terminal_alive(self.fileno):
            super()._sigcont_application()

    def close(self) -> None:
        super().close()
        if not self._suspended:  # the app is done with the terminal: no handler of ours stays
            signal.signal(signal.SIGTSTP, signal.SIG_DFL)
            signal.signal(signal.SIGCONT, signal.SIG_DFL)


def terminal_alive(fd: int) -> bool:
    """A terminal that hung up answers EIO to every terminal call, so isatty says False."""
    try:
        return os.isatty(fd)
    except OSError:
        return False


def terminal_driver(default: type[Driver]) -> type[Driver]:
    """TerminalDriver where Textual would use LinuxDriver; any other driver (headless, web) as is."""
    return TerminalDriver if default is LinuxDriver else default
