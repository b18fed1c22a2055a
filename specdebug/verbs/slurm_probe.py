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
    """One node's facts; a failure is said once on stderr (open_remote or here), and kept in the JSON."""
    try:
        async with open_remote(args, host) as remote:
            return await hosts.gather_host_info(remote)
    except VerbExit as exc:  # open_remote has said why
        return hosts.HostInfo(host=host, connected=False, error=exc.message or str(exc))
    except RemoteError as exc:
        err(f"{host}: {exc}")
        return hosts.HostInfo(host=host, connected=False, error=str(exc))


async def probe_allocation(args: argparse.Namespace, spec: SlurmSpec, hosts: ModuleType) -> int:
    """Every node of the allocation at once.  Each error is printed once, on stderr (Slurm's own words
    went to stdout and stderr both before, and a job that is not running once more per node): a job
    that is not running has its nodes listed, not probed (each would fail with the job's error)."""
    doc: dict[str, Any] = {"host": args.host, "job": spec.job, "state": None, "name": None}
    try:
        job = await job_info(spec.job)
    except RemoteError as exc:
        err(f"{args.host}: {exc}")
        doc.update(connected=False, error=str(exc), nodes=[])
        if args.json:
            print_json(doc)
        return 1
    doc.update(state=job.state, name=job.name)
    if job.running:
        infos = await asyncio.gather(*(_probe_node(args, spec.on(n).text, hosts) for n in job.nodes))
        doc["error"] = None
    else:
        doc["error"] = f"job {spec.job} is {job.state}, not running"
        err(f"{args.host}: {doc['error']}")
        infos = [
            hosts.HostInfo(host=spec.on(n).text, connected=False, error="not probed: the job is not running")
            for n in job.nodes
        ]
    doc["connected"] = bool(infos) and all(i.connected for i in infos)
    doc["nodes"] = [{"node": n, **i.model_dump(mode="json")} for n, i in zip(job.nodes, infos, strict=True)]
    if args.json:
        print_json(doc)
    else:
        out(f"{args.host}: job {spec.job} {doc['state']}", newlines=False)
        for node in doc["nodes"]:
            what = (
                f"{node['hostname']}  {node['cpus']} cpus"
                if node["connected"]
                else ("not connected" if job.running else "not probed")
            )
            out(f"  {node['node']}: {what}", newlines=False)  # why not: said once on stderr
    return 0 if doc["connected"] else 1
