"""A cold one-shot verb goes through the system's ssh and says what the asyncssh path says (issue 43).

`status` and `env` with no agent answering paid asyncssh's import (~180 ms) and its handshake in
Python before asking anything.  Now their connection is an OpenSSH master (remote/openssh.py) started
while the verb imports what it runs; where it cannot serve (a refused host key, here) the asyncssh
path runs and says why in its own words.  Real sshd, real ssh, the test's own files.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.sshd_harness import Sshd

pytestmark = pytest.mark.slow


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SPECDEBUG_NO_AGENT", "SPECDEBUG_OPENSSH")}
    tmp = tmp_path / "t"
    tmp.mkdir(exist_ok=True)
    env.update({"TMPDIR": str(tmp), "XDG_RUNTIME_DIR": tempfile.mkdtemp(prefix="sdo-"), **extra})
    return env


def _sd(env: dict[str, str], *argv: str, importtime: bool = False) -> subprocess.CompletedProcess[str]:
    flags = ["-X", "importtime"] if importtime else []
    return subprocess.run(
        [sys.executable, *flags, "-m", "specdebug.cli", *argv, "--no-agent"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def _imported(r: subprocess.CompletedProcess[str]) -> set[str]:
    """The modules a `-X importtime` run imported (asyncssh among them: the asyncssh path served)."""
    return {line.rsplit("|", 1)[1].strip() for line in r.stderr.splitlines() if "|" in line}


def _said(r: subprocess.CompletedProcess[str]) -> str:
    return "\n".join(line for line in r.stderr.splitlines() if "|" not in line)


def _ssh_wrapper(folder: Path, master_does: str) -> str:
    """A `ssh` first on PATH whose master invocation (ControlMaster=yes) runs `master_does` first;
    every other invocation is the real ssh.  Returns the PATH that has it first."""
    real = shutil.which("ssh")
    assert real is not None
    folder.mkdir()
    wrapper = folder / "ssh"
    wrapper.write_text(
        '#!/bin/sh\ncase " $* " in *" ControlMaster=yes "*) ' + master_does + f' ;; esac\nexec {real} "$@"\n'
    )
    wrapper.chmod(0o755)
    return f"{folder}:{os.environ['PATH']}"


def _profile(tmp_path: Path) -> Path:
    path = tmp_path / "p.toml"
    path.write_text('[server]\nargv = ["python3", "-m", "http.server"]\nport = 1\nlog_file = "/tmp/x.log"\n')
    return path


def test_status_and_env_say_what_the_asyncssh_path_says_without_importing_it(sshd: Sshd, tmp_path: Path):
    cfg, box = str(sshd.config_path), sshd.alias
    worker = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)"],
        env={**os.environ, "COLD_OPENSSH_MARK": "1"},
    )
    try:
        verbs = [
            ("status", "-F", cfg, box, "-c", str(_profile(tmp_path)), "--json"),
            ("env", "-F", cfg, box, "--pid", str(worker.pid), "--expect", "COLD_OPENSSH_MARK=1", "--json"),
        ]
        for argv in verbs:
            through = _sd(_env(tmp_path), *argv)
            direct = _sd(_env(tmp_path, SPECDEBUG_OPENSSH="0"), *argv)
            assert (through.returncode, through.stdout, through.stderr) == (
                direct.returncode,
                direct.stdout,
                direct.stderr,
            ), argv
            assert through.returncode in (0, 1) and through.stdout.startswith("{"), through.stderr
            timed = _sd(_env(tmp_path), *argv, importtime=True)
            names = {line.rsplit("|", 1)[1].strip() for line in timed.stderr.splitlines() if "|" in line}
            assert "asyncssh" not in names and timed.stdout == through.stdout, argv
    finally:
        worker.kill()
        worker.wait()


def test_a_refused_host_key_is_told_in_the_asyncssh_paths_words(sshd: Sshd, tmp_path: Path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    cfg = str(sshd.write_client_config(tmp_path / "cfg", empty))
    argv = ("status", "-F", cfg, sshd.alias, "-c", str(_profile(tmp_path)), "--json")
    through = _sd(_env(tmp_path), *argv)
    direct = _sd(_env(tmp_path, SPECDEBUG_OPENSSH="0"), *argv)
    assert through.returncode == direct.returncode != 0
    assert through.stderr == direct.stderr and "host key" in through.stderr.lower(), through.stderr
    assert empty.read_text() == ""  # OpenSSH learnt no key behind the user's back


def test_no_master_outlives_the_verb(sshd: Sshd, tmp_path: Path):
    env = _env(tmp_path)
    r = _sd(env, "status", "-F", str(sshd.config_path), sshd.alias, "-c", str(_profile(tmp_path)))
    assert r.returncode == 1, r.stderr  # a profile specdebug did not launch: not running
    assert list(Path(env["TMPDIR"]).iterdir()) == []  # the master's folder went with it
    tmp = env["TMPDIR"].encode()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                assert tmp not in f.read(), f"process {pid} of the verb is left"
        except OSError:
            continue


def test_a_deep_tmpdir_still_goes_through_openssh(sshd: Sshd, tmp_path: Path):
    """OpenSSH binds CONTROL.<16 characters> before naming it CONTROL: under a TMPDIR as deep as
    pytest-xdist's, that name passed a Unix socket's limit, the master exited at once and asyncssh
    served (the full suite's failure, not the machine's load)."""
    deep = tmp_path / ("d" * 70)
    deep.mkdir()
    argv = ("status", "-F", str(sshd.config_path), sshd.alias, "-c", str(_profile(tmp_path)), "--json")
    env = _env(tmp_path, TMPDIR=str(deep))
    timed = _sd(env, *argv, importtime=True)
    direct = _sd(_env(tmp_path, SPECDEBUG_OPENSSH="0"), *argv)
    assert "asyncssh" not in _imported(timed), _said(timed)
    assert (timed.returncode, timed.stdout) == (direct.returncode, direct.stdout), _said(timed)
    assert list(deep.iterdir()) == []  # its folder went with it


def test_a_slow_master_is_waited_for_not_replaced(sshd: Sshd, tmp_path: Path):
    """A master that takes seconds to come up (a far box, a loaded machine) is the path that serves:
    asyncssh connecting again would double the cost and change the path behind the user's back."""
    path = _ssh_wrapper(tmp_path / "bin", "sleep 3")
    argv = ("status", "-F", str(sshd.config_path), sshd.alias, "-c", str(_profile(tmp_path)), "--json")
    timed = _sd(_env(tmp_path, PATH=path), *argv, importtime=True)
    direct = _sd(_env(tmp_path, SPECDEBUG_OPENSSH="0"), *argv)
    assert "asyncssh" not in _imported(timed), _said(timed)
    assert (timed.returncode, timed.stdout) == (direct.returncode, direct.stdout), _said(timed)


def test_a_host_that_does_not_answer_is_not_asked_again_through_asyncssh(sshd: Sshd, tmp_path: Path):
    """A master that ended because the host could not be reached: asyncssh would wait for the same
    host again (the connect timeout twice); the verb says the network's words and no second path
    connects (here the real box would have answered asyncssh: a fallback is seen as a success)."""
    say = f"echo 'ssh: connect to host 127.0.0.1 port {sshd.port}: Connection timed out' >&2; exit 255"
    path = _ssh_wrapper(tmp_path / "bin", say)
    argv = ("status", "-F", str(sshd.config_path), sshd.alias, "-c", str(_profile(tmp_path)), "--json")
    timed = _sd(_env(tmp_path, PATH=path), *argv, "--connect-timeout", "3", importtime=True)
    said = _said(timed)
    assert timed.returncode != 0 and timed.stdout == "" and "connection timed out" in said.lower(), said
    assert "not connected after 3" in said, said
    assert "asyncssh" not in _imported(timed), said
