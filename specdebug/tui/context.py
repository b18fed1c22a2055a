"""What every pane can reach: the hosts, the chosen profile, the session journal, read-only mode.

Panes get one AppContext at construction and ask it for the target when they act (`target()`:
the chosen profile placed on its nodes, each with the app's connection), so switching hosts or
profiles needs no rewiring and a one-box profile is the one-node case of the same target.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # light at import: the app's first screen makes one before the core is imported
    from textual.binding import Binding

    from specdebug.core.boxjournal import BoxJournal
    from specdebug.core.deployment import Deployment
    from specdebug.core.journal import Journal
    from specdebug.core.profiles import Profile
    from specdebug.core.target import Target
    from specdebug.remote.api import Connection
    from specdebug.remote.factory import HostKeyPrompt


@dataclass(frozen=True)
class BisectPreset:
    """A bisection the Bisect pane offers ready to start: its good and bad profiles, short benchmarks."""

    good: Path
    bad: Path
    bench: dict[str, int] = field(default_factory=dict)  # BisectOptions fields: requests, output_len, ...


@dataclass
class AppContext:
    remotes: dict[str, Connection] = field(
        default_factory=dict
    )  # host name -> Connection (insertion order = UI order)
    selected: str | None = None  # host the panes act on
    profile_path: Path | None = None
    profile: Profile | None = None
    session_dir: Path | None = None  # journal folder (specdebug.core.journal.Journal)
    readonly: bool = False  # pairing seats: no action that changes the box
    journal: Journal | BoxJournal | None = None
    profile_choices: list[Path] = field(default_factory=list)  # what the profile picker offers
    profile_loader: Callable[[Path], Profile] | None = None  # path -> Profile (the demo rewrites ports)
    # the host-key decision the remotes were built with; the app answers it while it runs (None:
    # the remotes decide alone, e.g. refuse unknown keys)
    host_key_prompt: HostKeyPrompt | None = None
    keymap: Mapping[str, str] = field(default_factory=dict)  # binding id -> keys (the user's keymap)
    bisect_preset: BisectPreset | None = None  # the demo offers the story's bisection in pane 6
    # every profile whose server this session may have started (the demo stops them at exit); None: not tracked
    launched_profiles: list[Profile] | None = None
    ssh_config: str | None = None  # where a deployment's leader address is read from (-F)
    # placements made (placing reads ssh config): id(profile) -> (profile, host placed on, deployment);
    # a pane keeps state per deployment (the Startup pane's monitor), so one profile keeps its placement
    _placed: dict[int, tuple[Profile, str | None, Deployment | None]] = field(
        default_factory=dict, repr=False
    )

    def keys_of(self, binding: Binding) -> list[str]:
        """The keys that run `binding` now (the user's keymap first, then its default)."""
        keys = self.keymap.get(binding.id, binding.key) if binding.id else binding.key
        return [k.strip() for k in keys.split(",") if k.strip()]

    def remote(self) -> Connection | None:
        """The selected host's connection (a path typed in the Logs pane, the header's host)."""
        host = self.host()
        return self.remotes[host] if host is not None else None

    def host(self) -> str | None:
        """The host the panes act on: the selected one, else the first connected here."""
        if self.selected and self.selected in self.remotes:
            return self.selected
        return next(iter(self.remotes), None)

    def target(self, profile: Profile | None = None) -> Target | None:
        """The chosen profile (or `profile`: a bisection's good end) placed, over the connections
        the app holds: a one-box profile is one node on the selected host; a deployment is its nodes
        (`target_of`: a node with no connection here is in `unreachable`; a pane acting says so).  None: no profile,
        no host for a one-box profile, or a deployment that cannot be placed."""
        from specdebug.core.deployment import DeploymentError, place
        from specdebug.core.target import target_of

        profile = profile or self.profile
        if profile is None:
            return None
        host = self.host() if profile.deployment is None else None  # a deployment names its nodes
        known = self._placed.get(id(profile))
        if known is None or known[0] is not profile or known[1] != host:
            try:
                dep: Deployment | None = place(profile, host, ssh_config=self.ssh_config)
            except DeploymentError:
                dep = None
            while len(self._placed) >= 8:  # the profiles of one session: a handful
                self._placed.pop(next(iter(self._placed)))
            known = self._placed[id(profile)] = (profile, host, dep)
        return target_of(known[2], self.remotes) if known[2] is not None else None
