"""The TUI's terminal driver resumes only after a suspend (specdebug/tui/driver.py).

The kernel sends SIGCONT with every hangup; Textual's LinuxDriver restarted application mode on
it, so a demo whose terminal closed while it stopped its server spun at 100% CPU and never exited
(tests/integration/test_demo.py has the real case in tmux)."""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest
from textual.drivers.headless_driver import HeadlessDriver
from textual.drivers.linux_driver import LinuxDriver

from specdebug.tui import driver as tui_driver
from specdebug.tui.driver import TerminalDriver, terminal_alive, terminal_driver


@pytest.fixture
def handlers():
    """The process's SIGTSTP/SIGCONT handlers as they were (the driver sets them process-wide)."""
    old = {s: signal.getsignal(s) for s in (signal.SIGTSTP, signal.SIGCONT)}
    yield
    for s, h in old.items():
        signal.signal(s, h)


def _driver(monkeypatch) -> tuple[TerminalDriver, list[str]]:
    d = TerminalDriver(app=None)  # type: ignore[arg-type]  # the app is only used once it starts
    calls: list[str] = []
    monkeypatch.setattr(d, "start_application_mode", lambda: calls.append("start"))
    monkeypatch.setattr(d, "stop_application_mode", lambda: calls.append("stop"))
    monkeypatch.setattr(tui_driver, "terminal_alive", lambda fd: True)
    return d, calls


async def test_a_sigcont_without_a_suspend_restarts_nothing(monkeypatch, handlers) -> None:
    d, calls = _driver(monkeypatch)
    d._sigcont_application()  # what a hangup sends, the app running or already stopping
    assert calls == []


async def test_ctrl_z_then_fg_still_resumes(monkeypatch, handlers) -> None:
    d, calls = _driver(monkeypatch)
    d.suspend_application_mode()
    assert signal.getsignal(signal.SIGCONT) == d._sigcont_application  # kept while suspended
    d._sigcont_application()
    assert calls == ["stop", "start"]
    d._sigcont_application()  # a second SIGCONT: already running
    assert calls == ["stop", "start"]


async def test_no_resume_onto_a_terminal_that_hung_up(monkeypatch, handlers) -> None:
    d, calls = _driver(monkeypatch)
    monkeypatch.setattr(tui_driver, "terminal_alive", lambda fd: False)
    d.suspend_application_mode()
    d._sigcont_application()
    assert calls == ["stop"]


async def test_closing_gives_the_signals_back(monkeypatch, handlers) -> None:
    d, _ = _driver(monkeypatch)
    assert signal.getsignal(signal.SIGCONT) == d._sigcont_application
    d.close()
    assert signal.getsignal(signal.SIGCONT) == signal.SIG_DFL
    assert signal.getsignal(signal.SIGTSTP) == signal.SIG_DFL


def test_a_hung_up_terminal_is_not_alive() -> None:
    master, slave = os.openpty()
    try:
        assert terminal_alive(slave)
        os.close(master)
        master = -1
        assert not terminal_alive(slave)
    finally:
        os.close(slave)
        if master >= 0:
            os.close(master)


def test_only_the_terminal_driver_is_replaced() -> None:
    assert terminal_driver(LinuxDriver) is TerminalDriver
    other: Any = HeadlessDriver
    assert terminal_driver(other) is HeadlessDriver
