"""Per-node knobs of a deployment: what `[deployment] node_env` / `node_args` set differently on
one node between the good and the bad profile (the classic multi-node bug: env that reached one
node's workers and not the other's).

Each is a knob of its own, named `[NODE] NAME` (`[node1] NCCL_IB_DISABLE`, `[node1] --flag`), moved
on that node only; a knob of `[server]` moves on every node at once.  Plumbing flags (a node's
port, log file) are never knobs.  A deployment's fingerprint covers its per-node tables too, so two
candidates that differ only on one node are two configs.  Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import json

from specdebug.core.fingerprint import LENGTH, PLUMBING_FLAGS, split_argv
from specdebug.core.profiles import Knob, Profile
from specdebug.core.profiles.diff import SWITCH_SHOWN


def node_flags(args: list[str]) -> dict[str, list[str]]:
    """A node's extra flags without the plumbing ones (its port, log file: per profile anyway)."""
    return {k: v for k, v in split_argv(["_", *args])[1] if k not in PLUMBING_FLAGS}


def knob_name(node: str, name: str) -> str:
    return f"[{node}] {name}"


def split_name(name: str) -> tuple[str, str] | None:
    """(node, the env var or flag) of a per-node knob's name; None for a knob of `[server]`
    (host specs have no spaces: the first `] ` ends the node)."""
    if not name.startswith("[") or "] " not in name:
        return None
    node, _, inner = name[1:].partition("] ")
    return node, inner


def node_knobs(good: Profile, bad: Profile) -> list[Knob]:
    """The per-node differences, node by node (env, then flags); none without two deployments."""
    a, b = good.deployment, bad.deployment
    if a is None or b is None:
        return []
    out: list[Knob] = []
    for node in a.nodes:
        env_a, env_b = a.node_env.get(node, {}), b.node_env.get(node, {})
        for key in sorted({*env_a, *env_b}):
            if env_a.get(key) != env_b.get(key):
                out.append(
                    Knob(
                        name=knob_name(node, key), kind="env", value_a=env_a.get(key), value_b=env_b.get(key)
                    )
                )
        fa, fb = node_flags(a.node_args.get(node, [])), node_flags(b.node_args.get(node, []))
        for flag in [*fa, *(f for f in fb if f not in fa)]:
            ta, tb = fa.get(flag), fb.get(flag)
            if ta != tb:
                out.append(
                    Knob(
                        name=knob_name(node, flag),
                        kind="flag",
                        value_a=_shown(ta),
                        value_b=_shown(tb),
                        tokens_a=ta,
                        tokens_b=tb,
                        switch_a=ta == [],
                        switch_b=tb == [],
                    )
                )
    return out


def _shown(tokens: list[str] | None) -> str | None:
    return None if tokens is None else " ".join(tokens) if tokens else SWITCH_SHOWN


def with_node_knobs(profile: Profile, knobs: list[Knob]) -> Profile:
    """The profile with each per-node knob set to its bad side's value on its node only."""
    spec = profile.deployment
    if spec is None or not knobs:
        return profile
    env = {n: dict(e) for n, e in spec.node_env.items()}
    args = {n: list(a) for n, a in spec.node_args.items()}
    for knob in knobs:
        where = split_name(knob.name)
        assert where is not None
        node, inner = where
        if knob.kind == "env":
            table = env.setdefault(node, {})
            if knob.value_b is None:
                table.pop(inner, None)
            else:
                table[inner] = knob.value_b
            continue
        pairs = dict(split_argv(["_", *args.get(node, [])])[1])
        if knob.tokens_b is None:
            pairs.pop(inner, None)
        else:
            pairs[inner] = list(knob.tokens_b)
        args[node] = [t for flag, values in pairs.items() for t in (flag, *values)]
    spec = spec.model_copy(update={"node_env": env, "node_args": args})
    return profile.model_copy(update={"deployment": spec})


def config_fingerprint(profile: Profile) -> str:
    """The profile's fingerprint, with its per-node env and (non-plumbing) flags when it has any."""
    spec = profile.deployment
    base = profile.fingerprint()
    if spec is None:
        return base
    env = {n: e for n, e in spec.node_env.items() if e}
    flags = {n: f for n, a in spec.node_args.items() if (f := node_flags(a))}
    if not env and not flags:
        return base
    blob = json.dumps([base, env, flags], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:LENGTH]
