"""The header's status line: every host's connection state, the profile, read-only mode.

Imported with the app's first screen, so it names the remote module's types only for mypy: on the
first screen (`connecting`) no connection exists yet, and nothing of the transport is imported.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from rich.text import Text

if TYPE_CHECKING:
    from specdebug.remote.api import Connection

STATE_STYLE = {"connected": "green", "failed": "bold red", "reconnecting": "bold yellow"}  # else yellow


def connection_line(
    connecting: list[str], remotes: Mapping[str, Connection], profile: str | None, readonly: bool
) -> Text:
    """`connecting`: hosts named before their connections exist; then each connection's state."""
    parts = Text()
    for name in connecting:
        parts.append("  " if parts else "")
        parts.append(f"{name} ", style="bold")
        parts.append("connecting", style="yellow")
    for name, remote in remotes.items():
        st = remote.status
        state = st.state.value
        parts.append("  " if parts else "")
        parts.append(f"{name} ", style="bold")
        parts.append(state, style=STATE_STYLE.get(state, "yellow"))
        if state == "connected" and st.rtt_ms is not None:
            parts.append(f" {st.rtt_ms:.1f}ms", style="dim")
        if state == "reconnecting":
            parts.append(f" (attempt {st.attempt}: {st.last_error or ''})", style="dim")
        if state == "failed":
            parts.append(f" ({st.last_error or ''})"[:100], style="dim")
    if profile is not None:
        parts.append(f"   profile {profile}", style="cyan")
    if readonly:
        parts.append("   READ-ONLY", style="bold magenta")
    return parts
