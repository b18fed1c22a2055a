"""`specdebug probe slurm:JOBID`: the allocation's nodes, each with the helper's host facts.

A Slurm allocation is several boxes behind one name: the job's nodes come from
`scontrol show job -o JOBID` and each is probed as `slurm:JOBID:NODE` (its own helper step),
all at once.  JSON: `host`, `job`, `state`, `name`, `connected` (every node answered), `error`,
`nodes` (each `node` plus the single-host probe's keys).
"""

from __future__ import annotations

import argparse
import asyncio
from types import ModuleType
from typing import Any

from specdebug.remote.api import HostSpecError, RemoteError
from specdebug.transport.slurm.job import SlurmSpec, job_info
from specdebug.verbs.common import VerbExit, err, open_remote, out, print_json


def allocation_spec(text: str) -> SlurmSpec | None:
    """The spec when it names a whole allocation (`slurm:JOBID`), None when it names a node; a bad
    spec is one line and exit 2."""
    try:
        spec = SlurmSpec.parse(text)
    except HostSpecError as exc:
        err(str(exc))
        raise VerbExit(2, str(exc)) from exc
    return spec if spec.node is None else None


async def _probe_node(args: argparse.Namespace, host: str, hosts: ModuleType) -> Any:
    try:
        async with open_remote(args, host) as remote:
            return await hosts.gather_host_info(remote)
    except VerbExit as exc:
        return hosts.HostInfo(host=host, connected=False, error=exc.message or str(exc))
    except RemoteError as exc:
        err(f"{host}: {exc}")
        return hosts.HostInfo(host=host, connected=False, error=str(exc))


async def probe_allocation(args: argparse.Namespace, spec: SlurmSpec, hosts: ModuleType) -> int:
    doc: dict[str, Any] = {"host": args.host, "job": spec.job, "state": None, "name": None}
    try:
        job = await job_info(spec.job)
    except RemoteError as exc:
        err(f"{args.host}: {exc}")
        doc.update(connected=False, error=str(exc), nodes=[])
    else:
        infos = await asyncio.gather(*(_probe_node(args, spec.on(n).text, hosts) for n in job.nodes))
        doc.update(state=job.state, name=job.name)
        doc["connected"] = bool(infos) and all(i.connected for i in infos)
        doc["error"] = None if job.running else f"job {spec.job} is {job.state}, not running"
        doc["nodes"] = [
            {"node": n, **i.model_dump(mode="json")} for n, i in zip(job.nodes, infos, strict=True)
        ]
    if args.json:
        print_json(doc)
    else:
        out(
            f"{args.host}: job {spec.job} {doc['state'] or '?'} {doc.get('error') or ''}".rstrip(),
            newlines=False,
        )
        for node in doc["nodes"]:
            what = (
                f"{node['hostname']}  {node['cpus']} cpus"
                if node["connected"]
                else f"not connected ({node['error']})"
            )
            out(f"  {node['node']}: {what}", newlines=False)
    return 0 if doc["connected"] else 1
