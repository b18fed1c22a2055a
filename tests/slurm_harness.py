"""A throwaway Slurm cluster on this machine for tests: munged, slurmctld and several slurmd.

Real Slurm (Debian's slurm-wlm), not a mock: srun, salloc, squeue and scancel talk to a real
controller.  Everything lives in a temp folder the harness owns: its own slurm.conf (controller
and node ports on free loopback ports), state, spool, pid and log files, and a munge key and
munged socket of its own.  /etc/slurm and the system's munge are never read or touched; clients
find the cluster only through SLURM_CONF (see `Slurm.env`).  Each daemon runs in the foreground in
its own process group, and `stop` ends exactly those groups (after cancelling every job).

Debian's build runs several slurmd on one machine when each gets `-N NODENAME` and its own Port
in slurm.conf (`%n` in the spool/pid/log paths), so the harness makes NODES nodes on 127.0.0.1.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.ports import port_range
from tests.sshd_harness import free_port

SLURM_BINARIES = ("slurmctld", "slurmd", "munged", "srun", "salloc", "squeue", "scancel", "sinfo")


def missing_binaries() -> list[str]:
    """The Slurm/munge programs this machine lacks (empty: the harness can run)."""
    return [b for b in SLURM_BINARIES if shutil.which(b) is None and not Path("/usr/sbin", b).exists()]


def _sbin(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


class SlurmHarnessError(RuntimeError):
    """The cluster did not come up; the message carries the tail of the daemon that failed."""


@dataclass
class Slurm:
    workdir: Path
    conf: Path
    nodes: list[str]
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """The environment a Slurm client needs to reach this cluster (and only this one)."""
        env = dict(os.environ if base is None else base)
        env["SLURM_CONF"] = str(self.conf)
        for k in [k for k in env if k.startswith(("SLURM_JOB", "SLURM_STEP", "SLURM_NODELIST"))]:
            del env[k]  # a test run inside an allocation must not aim our clients at it
        return env

    def run(self, *argv: str, timeout: float = 30.0, check: bool = True) -> subprocess.CompletedProcess[str]:
        res = subprocess.run(
            list(argv), env=self.env(), capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and res.returncode != 0:
            raise SlurmHarnessError(f"{' '.join(argv)}: rc {res.returncode}: {res.stderr.strip()[-500:]}")
        return res

    def allocate(self, nodes: int | None = None, name: str = "specdebug-test") -> str:
        """A running allocation made with `salloc --no-shell`; returns its job id."""
        n = nodes or len(self.nodes)
        res = self.run("salloc", "--no-shell", f"-N{n}", f"--job-name={name}", "--immediate=20", timeout=40)
        m = re.search(r"Granted job allocation (\d+)", res.stderr + res.stdout)
        if not m:
            raise SlurmHarnessError(f"salloc gave no job id: {res.stderr.strip()[-300:]}")
        return m.group(1)

    def job_ids(self) -> list[str]:
        return self.run("squeue", "-h", "-o", "%i").stdout.split()

    def steps(self, jobid: str) -> list[str]:
        """Step ids (`J.S`) of the job that squeue still lists."""
        out = self.run("squeue", "-h", "-s", "-j", jobid, "-o", "%i", check=False).stdout
        return [s for s in out.split() if "." in s]

    def node_states(self) -> dict[str, str]:
        out = self.run("sinfo", "-h", "-N", "-o", "%N %t", check=False).stdout
        return dict(line.split(None, 1) for line in out.splitlines() if " " in line)

    def log_tail(self, name: str, lines: int = 15) -> str:
        path = self.workdir / "log" / f"{name}.log"
        try:
            return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        """Cancel every job, then end the daemons' own process groups (munged last)."""
        if "slurmctld" in self.procs and self.procs["slurmctld"].poll() is None:
            try:
                for job in self.job_ids():
                    self.run("scancel", job, check=False, timeout=10)
                deadline = time.monotonic() + 15
                while self.job_ids() and time.monotonic() < deadline:
                    time.sleep(0.3)
            except (subprocess.SubprocessError, SlurmHarnessError, OSError):
                pass
        order = [n for n in self.procs if n.startswith("slurmd")] + ["slurmctld", "munged"]
        for name in order:
            proc = self.procs.get(name)
            if proc is None:
                continue
            _end_group(proc)
        self.procs.clear()


def _end_group(proc: subprocess.Popen[bytes]) -> None:
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(wait)
            try:
                os.killpg(proc.pid, 0)  # the leader went; anything left in its group goes too
            except ProcessLookupError:
                break
        except subprocess.TimeoutExpired:
            continue


def _conf_text(work: Path, nodes: Sequence[str], ports: dict[str, int], cpus: int) -> str:
    srun_low = port_range(41)  # srun's own listening ports: never handed to a test server
    lines = [
        "ClusterName=specdebugtest",
        "SlurmctldHost=localhost(127.0.0.1)",
        f"SlurmctldPort={ports['ctld']}",
        f"SlurmdPort={ports[nodes[0]]}",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={work / 'munge' / 'munge.socket'}",
        f"SlurmUser={_user()}",
        f"SlurmdUser={_user()}",
        f"StateSaveLocation={work / 'state'}",
        f"SlurmdSpoolDir={work / 'spool'}/%n",
        f"SlurmctldPidFile={work / 'run' / 'slurmctld.pid'}",
        f"SlurmdPidFile={work / 'run'}/slurmd-%n.pid",
        f"SlurmctldLogFile={work / 'log' / 'slurmctld.log'}",
        f"SlurmdLogFile={work / 'log'}/slurmd-%n.log",
        # no cgroups in a test container: steps are tracked by process group
        "ProctrackType=proctrack/pgid",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "SchedulerType=sched/builtin",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "MpiDefault=none",
        "ReturnToService=2",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        "KillWait=5",
        f"SrunPortRange={srun_low}-{srun_low + 40}",
    ]
    for n in nodes:
        lines.append(
            f"NodeName={n} NodeHostname=localhost NodeAddr=127.0.0.1 Port={ports[n]} CPUs={cpus} State=UNKNOWN"
        )
    lines.append(
        f"PartitionName=test Nodes={','.join(nodes)} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES"
    )
    return "\n".join(lines) + "\n"


def _user() -> str:
    import getpass

    return getpass.getuser()


def _spawn(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _wait(cond, timeout: float, what: str, tail) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.2)
    raise SlurmHarnessError(f"{what} not ready after {timeout} s:\n{tail()}")


def start_slurm(workdir: Path, nodes: int = 2, timeout: float = 60.0) -> Slurm:
    """munged, slurmctld and `nodes` slurmd on this machine; returns once sinfo shows them idle."""
    work = Path(workdir)
    for sub in ("munge", "key", "state", "spool", "run", "log"):
        (work / sub).mkdir(parents=True, exist_ok=True)
    os.chmod(work, 0o755)
    os.chmod(work / "munge", 0o755)  # munged wants its socket folder reachable by all
    os.chmod(work / "key", 0o700)
    key = work / "key" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    names = [f"n{i + 1}" for i in range(nodes)]
    for n in names:
        (work / "spool" / n).mkdir(exist_ok=True)
    ports = {"ctld": free_port(), **{n: free_port() for n in names}}
    conf = work / "slurm.conf"
    conf.write_text(_conf_text(work, names, ports, os.cpu_count() or 1))
    cluster = Slurm(workdir=work, conf=conf, nodes=names)
    env = cluster.env()
    try:
        sock = work / "munge" / "munge.socket"
        cluster.procs["munged"] = _spawn(
            [
                _sbin("munged"),
                "--foreground",
                "--force",  # a pytest temp folder is 0700: its socket is ours alone, which is the point
                f"--socket={sock}",
                f"--key-file={key}",
                f"--log-file={work / 'log' / 'munged.log'}",
                f"--pid-file={work / 'run' / 'munged.pid'}",
                f"--seed-file={work / 'run' / 'munged.seed'}",
            ],
            env,
            work / "log" / "munged.out",
        )
        _wait(sock.exists, 15, "munged", lambda: cluster.log_tail("munged"))
        cluster.procs["slurmctld"] = _spawn(
            [_sbin("slurmctld"), "-D", "-i", "-f", str(conf)], env, work / "log" / "slurmctld.out"
        )
        _wait(
            lambda: cluster.run("sinfo", "-h", check=False, timeout=10).returncode == 0,
            timeout,
            "slurmctld",
            lambda: cluster.log_tail("slurmctld"),
        )
        for n in names:
            cluster.procs[f"slurmd-{n}"] = _spawn(
                [_sbin("slurmd"), "-D", "-f", str(conf), "-N", n], env, work / "log" / f"slurmd-{n}.out"
            )
        _wait(
            lambda: all(cluster.node_states().get(n) == "idle" for n in names),
            timeout,
            "slurmd nodes",
            lambda: f"{cluster.node_states()}\n" + "\n".join(cluster.log_tail(f"slurmd-{n}") for n in names),
        )
    except BaseException:
        cluster.stop()
        raise
    atexit.register(cluster.stop)  # a script that dies before its own stop leaves no daemons
    return cluster
