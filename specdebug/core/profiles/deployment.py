"""The `[deployment]` table of a profile: one server spread over several nodes.

Its own module because it is the one part of a profile that names *where* a server runs: the
nodes (host specs, the first is the leader), the leader's rendezvous port and address, and what
differs per node (extra env such as `NCCL_IB_DISABLE=1` on one node, a flag such as `--port`).
How a profile is placed on its nodes is specdebug.core.deployment; this only validates.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from specdebug.core.model import Model
from specdebug.remote.shell import is_env_name

MAX_NODES = 256
ExpectTransport = Literal["ib", "ib-gdrdma"]


class DeploymentSpec(Model):
    """Where the server runs when it spans several nodes (absent: one box, the verb's HOST)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    nodes: list[str] = Field(
        min_length=1,
        max_length=MAX_NODES,
        description="Host specs (ssh aliases, user@host:port, slurm:JOBID:NODE); the first is the leader.",
    )
    dist_init_port: int = Field(ge=1, le=65535, description="Where the leader's rendezvous listens.")
    leader_address: str | None = Field(
        default=None,
        description="The leader's address as the other nodes reach it (default: node0's HostName).",
    )
    node_env: dict[str, dict[str, str]] = Field(
        default_factory=dict, description="Extra environment per node: node -> {VAR = value}."
    )
    node_args: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Flags per node: node -> [--flag, value, ...]; a flag given here replaces the argv's.",
    )
    expect_transport: ExpectTransport | None = Field(
        default=None,
        description='What every inter-node NCCL edge must go over: "ib" (InfiniBand/RoCE) or '
        '"ib-gdrdma" (with GPUDirect RDMA); `env` fails on a socket edge or an unproven transport.',
    )

    @field_validator("nodes")
    @classmethod
    def _nodes(cls, nodes: list[str]) -> list[str]:
        for node in nodes:
            if not node.strip() or any(c.isspace() or not c.isprintable() for c in node):
                raise ValueError(f"bad host spec {node!r}: no spaces or control characters")
        dup = sorted({n for n in nodes if nodes.count(n) > 1})
        if dup:
            raise ValueError(f"node {dup[0]!r} is listed twice (each node runs one rank)")
        return nodes

    @field_validator("leader_address")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        if value is not None and (
            not value or any(c.isspace() or c in "/@" or not c.isprintable() for c in value)
        ):
            raise ValueError(f"bad address {value!r}: a host name or an IP address")
        return value

    @field_validator("node_env")
    @classmethod
    def _env_names(cls, node_env: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
        for node, env in node_env.items():
            for key in env:
                if not is_env_name(key):
                    raise ValueError(f"node {node!r}: invalid environment variable name {key!r}")
        return node_env

    @field_validator("node_args")
    @classmethod
    def _args(cls, node_args: dict[str, list[str]]) -> dict[str, list[str]]:
        for node, args in node_args.items():
            if args and not args[0].startswith("--"):
                raise ValueError(f"node {node!r}: flags start with a --flag, got {args[0]!r}")
        return node_args

    @model_validator(mode="after")
    def _known_nodes(self) -> DeploymentSpec:
        for table in (self.node_env, self.node_args):
            for node in table:
                if node not in self.nodes:
                    raise ValueError(f"node {node!r} is not in nodes ({', '.join(self.nodes)})")
        return self
