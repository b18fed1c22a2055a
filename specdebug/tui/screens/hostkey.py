"""Modal for an unknown host key: show host, key type and SHA256 fingerprint; the user decides."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from specdebug.transport.ssh.hostkeys import HostKeyInfo, KeyDecision, known_hosts_name


class HostKeyScreen(ModalScreen[KeyDecision]):
    BINDINGS = [
        Binding("o", "decide('once')", "Accept once", id="hostkey.once"),
        Binding("s", "decide('save')", "Accept and save", id="hostkey.save"),
        Binding("r,escape", "decide('refuse')", "Refuse", id="hostkey.refuse"),
    ]
    DEFAULT_CSS = """
    HostKeyScreen { align: center middle; }
    HostKeyScreen > Vertical { width: 84; height: auto; border: thick $warning; background: $surface; padding: 1 2; }
    HostKeyScreen Horizontal { height: auto; margin-top: 1; }
    HostKeyScreen Button { margin-right: 2; }
    """

    def __init__(self, info: HostKeyInfo) -> None:
        super().__init__()
        self.info = info

    def compose(self) -> ComposeResult:
        i = self.info
        body = Text()
        body.append("Unknown host key\n\n", style="bold")
        body.append("host         ")
        body.append(f"{i.host} ({known_hosts_name(i.hostname, i.port)})\n", style="bold")
        body.append("key type     ")
        body.append(f"{i.key_type}\n")
        body.append("fingerprint  ")
        body.append(f"{i.fingerprint}\n\n", style="bold yellow")
        body.append("Compare the fingerprint with the box (ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub).")
        with Vertical():
            yield Static(body)
            with Horizontal():
                yield Button("Accept once [o]", id="once", variant="primary")
                yield Button("Accept and save [s]", id="save", variant="warning")
                yield Button("Refuse [r]", id="refuse", variant="error")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(KeyDecision(event.button.id) if event.button.id else KeyDecision.REFUSE)

    def action_decide(self, decision: str) -> None:
        self.dismiss(KeyDecision(decision))
