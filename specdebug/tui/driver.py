"""The terminal driver: Textual's LinuxDriver, resumed only after a suspend (Ctrl+Z).

Why: LinuxDriver restarts application mode on every SIGCONT, and the kernel sends SIGCONT along
with SIGHUP whenever the terminal hangs up (the window closed, tmux killed, ssh dropped).  That
started a second input thread on the dead terminal, reading EOF in a loop at 100% CPU, and the
process never exited (the thread is not a daemon): a demo whose pane closed while it stopped its
server spun until it was killed.  Here SIGCONT resumes only a driver that was suspended and whose
terminal is still there, and once the app has closed the driver the process's SIGTSTP/SIGCONT go
back to their defaults.
"""

from __future__ import annotations

import os
import signal
from typing import Any

from textual.driver import Driver
from textual.drivers.linux_driver import LinuxDriver


class TerminalDriver(LinuxDriver):
    """LinuxDriver that a hangup's SIGCONT does not restart."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._suspended = False

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
