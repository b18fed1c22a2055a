"""The Env pane on a deployment: every node's workers checked at once, and the NCCL transport proof.

Why apart from env.py: the one-box pane checks one host's workers; a deployment's check is
`core.deployment.node_env.target_env` (each node's env check with its node profile, and its NCCL
lines of this run), the same calls as `specdebug env -c PROFILE --json` (`nodes`, `transport`).  This
module runs it and says the verdict: per node, then the transport (`ib-gdrdma`, `ib`, `socket`,
`unproven` with how to make the lines exist) and its findings.  Mixed into EnvPane.
"""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.message import Message
from textual.widgets import Static

from specdebug.core.deployment import Deployment
from specdebug.core.deployment.nccl import TransportProof
from specdebug.core.deployment.node_env import NodeEnv, target_env
from specdebug.core.env.model import BOX_WIDE_VERDICT, EnvReport
from specdebug.core.profiles import Profile
from specdebug.core.sanitize import visible
from specdebug.core.target import target_of
from specdebug.remote.api import Remote, RemoteError
from specdebug.tui.pane import Pane

TRANSPORT_STYLE = {"ib-gdrdma": "bold green", "ib": "green", "socket": "bold yellow", "unproven": "magenta"}
FINDINGS_SHOWN = 2


class EnvNodes(Pane):
    """A deployment's env check for the Env pane (its base: EnvPane draws the matrix)."""

    # a line per node and the transport take rows: the how line is one row, and on a small terminal
    # the verdict's lines are one row each and the evidence gives its room to the matrix
    DEFAULT_CSS = """
    EnvNodes.-nodes #env-how { height: 1; text-wrap: nowrap; text-overflow: ellipsis; }
    EnvNodes.-nodes.-narrow #env-verdict { max-height: 6; text-wrap: nowrap; text-overflow: ellipsis; }
    EnvNodes.-nodes.-narrow #env-evidence-title, EnvNodes.-nodes.-narrow #env-evidence { display: none; }
    """

    node_envs: list[NodeEnv]
    transport: TransportProof | None = None
    reports: list[tuple[str | None, EnvReport]]

    class NodesReady(Message):
        def __init__(self, envs: list[NodeEnv], proof: TransportProof | None) -> None:
            super().__init__()
            self.envs = envs
            self.proof = proof

    def show_report(self, report: EnvReport, node: str | None = None) -> None:
        """EnvPane draws a report (with `node`: the deployment's, whose reports are set)."""

    def clear_nodes(self) -> None:
        self.node_envs, self.transport = [], None
        self.set_class(False, "-nodes")

    def node_target(self, node: str | None) -> tuple[Remote | None, Profile | None]:
        """Where a column's process runs: its node's connection and node profile (one box: the host's)."""
        dep = self.ctx.deployment()
        placed = dep.node(node) if dep is not None and node is not None else None
        if placed is None:
            return self.ctx.remote(), self.ctx.profile
        return self.ctx.remotes.get(placed.host), placed.profile

    async def check_nodes(self, dep: Deployment, quiet: bool, all_matching: bool = False) -> None:
        """Every node's env check and the transport proof (run inside the pane's check worker)."""
        how = self.query_one("#env-how", Static)
        how.update(
            Text(f"checking the workers on {len(dep.nodes)} nodes of {dep.profile.name}…", style="dim")
        )
        try:
            for node in dep.nodes:
                await self.ctx.remotes[node.host].wait_connected(30.0)
            remotes = {n.host: self.ctx.remotes[n.host] for n in dep.nodes}
            envs, proof = await target_env(target_of(dep, remotes), all_matching=all_matching)
        except (RemoteError, LookupError, OSError, TimeoutError) as exc:
            if not quiet:
                self.notify(f"env check failed: {exc}", severity="error")
            how.update(Text(f"env check failed: {exc}", style="red"))
            return
        self.post_message(self.NodesReady(envs, proof))

    @on(NodesReady)
    def _nodes_ready(self, event: NodesReady) -> None:
        self.show_nodes(event.envs, event.proof)

    def show_nodes(self, envs: list[NodeEnv], proof: TransportProof | None) -> None:
        """Draw a deployment's check (tests call it with fed reports)."""
        self.node_envs, self.transport = list(envs), proof
        self.set_class(True, "-nodes")  # a line per node and the transport: a taller verdict
        self.reports = [(e.node.host, e.report) for e in envs if e.report is not None]
        first = next(((h, r) for h, r in self.reports), None)
        if first is None:
            self.query_one("#env-verdict", Static).update(self.nodes_verdict())
            return
        self.show_report(first[1], node=first[0])

    def nodes_verdict(self) -> Text:
        """OK only when every node's workers are and the transport meets the deployment's
        expectation; `not running` when no node runs the server; a box-wide look gives no verdict.
        One line per node; then the transport proof."""
        envs = self.node_envs
        if envs and not any(e.running for e in envs):
            text = Text("not running", style="bold yellow")
            text.append(f"  on any of {len(envs)} nodes; press a for a box-wide look", style="dim")
        elif envs and all(e.report is not None and e.report.box_wide for e in envs):
            text = Text(BOX_WIDE_VERDICT, style="bold yellow")
            text.append(f"  {len(envs)} nodes, not this profile's server (no verdict)")
        else:
            ok = (
                bool(envs)
                and all(e.report is not None and e.report.summary.ok and not e.problem for e in envs)
                and not (self.transport is not None and self.transport.failures)
            )
            text = Text("OK" if ok else "FAILED", style="bold green" if ok else "bold red")
            text.append(f"  {len(envs)} nodes")
        for e in envs:
            text.append(f"\n{visible(e.node.host)}: ", style="bold")
            if e.report is None:
                text.append(visible(e.problem or "no report"), style="yellow" if not e.running else "red")
                continue
            s = e.report.summary
            text.append(s.verdict, style="yellow" if s.ok is None else "green" if s.ok else "bold red")
            text.append(f", {len(e.report.workers)} workers")
            if s.reasons:
                text.append(f": {visible(s.reasons[0])}", style="red")
            if e.problem:
                text.append(f" ({visible(e.problem)})", style="yellow")
        if self.transport is not None:
            text.append("\n")
            text.append_text(transport_text(self.transport))
        return text


def transport_text(proof: TransportProof) -> Text:
    """`transport: ib-gdrdma (reason) [source]`, then its findings and, unproven, how to prove it."""
    text = Text("transport: ", style="bold")
    text.append(proof.verdict, style=TRANSPORT_STYLE.get(proof.verdict, "bold red"))
    text.append(f" ({visible(proof.reason)})  [{visible(proof.source)}]", style="dim")
    if proof.expected is not None:
        text.append(f"\nexpected {proof.expected}: ", style="bold")
        text.append("FAILED" if proof.failures else "met", style="bold red" if proof.failures else "green")
    for failure in proof.failures[:1]:
        text.append(f"\n{visible(failure)}", style="red")
    for finding in proof.findings[:FINDINGS_SHOWN]:
        text.append(f"\nfinding: {visible(finding)}", style="bold yellow")
    if len(proof.findings) > FINDINGS_SHOWN:
        text.append(
            f"\n… {len(proof.findings) - FINDINGS_SHOWN} more findings (env -c PROFILE)", style="yellow"
        )
    if proof.hint:
        text.append(f"\nto prove it: {visible(proof.hint)}", style="magenta")
    return text
