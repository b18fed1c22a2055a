"""What every pane can reach: the hosts, the chosen profile, the session journal, read-only mode.

Panes get one AppContext at construction and ask it for the selected host's Remote when
they act, so switching hosts or profiles needs no rewiring.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from textual.binding import Binding

from specdebug.core.boxjournal import BoxJournal
from specdebug.core.deployment import Deployment, DeploymentError, place
from specdebug.core.journal import Journal
from specdebug.core.profiles import Profile
from specdebug.remote.api import Connection

if TYPE_CHECKING:
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
    _placed: tuple[Profile, Deployment | None] | None = field(default=None, repr=False)

    def keys_of(self, binding: Binding) -> list[str]:
        """The keys that run `binding` now (the user's keymap first, then its default)."""
        keys = self.keymap.get(binding.id, binding.key) if binding.id else binding.key
        return [k.strip() for k in keys.split(",") if k.strip()]

    def remote(self) -> Connection | None:
        if self.selected and self.selected in self.remotes:
            return self.remotes[self.selected]
        return next(iter(self.remotes.values()), None)

    def deployment(self) -> Deployment | None:
        """The profile placed on its nodes when it has `[deployment]` and every node is a host here
        (the panes then act on the deployment as one); None for a one-box profile."""
        profile = self.profile
        if profile is None or profile.deployment is None:
            return None
        if self._placed is not None and self._placed[0] is profile:
            return self._placed[1]
        try:
            dep: Deployment | None = place(profile, ssh_config=self.ssh_config)
        except DeploymentError:
            dep = None
        if dep is not None and any(n.host not in self.remotes for n in dep.nodes):
            dep = None  # a node the app has no connection to: the panes cannot act on it
        self._placed = (profile, dep)
        return dep
