"""Shared fixtures: a real OpenSSH sshd on loopback and a connected BoxClient to it."""

from __future__ import annotations

import fcntl
import fnmatch
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from specdebug.sim.box.ports import PORTS_VAR
from tests import clifork, leakcheck, ports
from tests.boxes import ssh_box
from tests.sshd_harness import SSHD, Sshd, start_sshd

# CI (SPECDEBUG_REQUIRE_SSHD set by .ci/run) runs the property tests on a fixed set of examples, so a
# landing is never decided by a new random draw; local runs keep exploring new examples each time.
settings.register_profile("ci", derandomize=True)
# a busy machine is not a slow strategy: Hypothesis's own clocks (its per-example deadline, its health
# check of generation speed) failed property tests beside 8 busy loops; the tests' own bounds remain
settings.register_profile("busy", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile(
    "ci-busy", parent=settings.get_profile("ci"), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
# verbs the suite runs take the direct path: no local agent (specdebug.agent) outlives a test; the agent's
# own tests (tests/integration/test_agent.py) start and stop theirs in a folder of their own
os.environ["SPECDEBUG_NO_AGENT"] = "1"
settings.load_profile("ci-busy" if os.environ.get("SPECDEBUG_REQUIRE_SSHD") else "busy")


# --- no process of the suite outlives it (tests/leakcheck.py) ------------------------------------


def _runs_the_session(config: pytest.Config) -> bool:
    """The xdist controller, or the only process of a `-n 0` run: not a worker."""
    return not hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    # a suite started in the background by a script (`cmd &` without job control: SIGINT ignored)
    # handed that to every process the tests start, and the tests of Ctrl+C waited on a CLI that
    # never saw it: Ctrl+C is the tests' to send, whatever started the suite
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if _runs_the_session(config):  # before any worker or test starts: all of them inherit it
        config.stash[_RUN_TAG] = leakcheck.tag_this_run()
        config.stash[_RUN_FOLDER] = _run_folder()
        _compile_the_tree()


def pytest_unconfigure(config: pytest.Config) -> None:
    folder = config.stash.get(_RUN_FOLDER, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def _bytecode_off() -> bool:
    """The caller's PYTHONDONTWRITEBYTECODE (or -B): no Python process of the run writes bytecode."""
    return sys.flags.dont_write_bytecode or bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))


def _compile_the_tree() -> None:
    """Bytecode for specdebug and the tests, written once before any worker starts, where the
    caller's PYTHONDONTWRITEBYTECODE would have every one of the suite's ~1,500 Python processes
    (verbs, sims, their spawned workers) compile them again: about 0.25 CPU-s a verb.  Into the
    checkout's own (git-ignored) __pycache__ folders, as Python itself writes them without that
    setting; the stdlib's and the venv's are there from their install.  (A PYTHONPYCACHEPREFIX
    instead, as until stop 30, also hid those, so each test process compiled them all again.)"""
    if not _bytecode_off():
        return
    import compileall

    root = Path(__file__).resolve().parent.parent
    for package in ("specdebug", "tests"):
        compileall.compile_dir(root / package, quiet=2)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Before xdist starts its workers (its own hook runs last)."""
    if session.config.pluginmanager.getplugin("dsession") is not None:
        _rewrite_the_tests(session.config)


def _rewrite_the_tests(config: pytest.Config) -> None:
    """pytest's assert-rewritten bytecode of every test module, written once by the controller where
    PYTHONDONTWRITEBYTECODE would have each worker rewrite all of them again as it collects (2.9 of
    its 4.4 CPU-s, times 5 workers on 2 cores).  Through pytest's own (private) rewrite functions:
    where they differ in another pytest, each worker rewrites as before."""
    if not _bytecode_off():
        return  # the first worker to import a test module writes it
    patterns = [*config.getini("python_files"), "conftest.py"]  # what pytest rewrites
    try:
        from _pytest.assertion import rewrite

        state = config.stash[rewrite.assertstate_key]
        for path in sorted((Path(__file__).resolve().parent).rglob("*.py")):
            if not any(fnmatch.fnmatch(path.name, pattern) for pattern in patterns):
                continue
            pyc = rewrite.get_cache_dir(path) / (path.name[:-3] + rewrite.PYC_TAIL)
            if rewrite._read_pyc(path, pyc, state.trace) is None:  # noqa: SLF001
                source_stat, code = rewrite._rewrite_test(path, config)  # noqa: SLF001
                if rewrite.try_makedirs(pyc.parent):
                    rewrite._write_pyc(state, code, source_stat, pyc)  # noqa: SLF001
    except Exception:  # noqa: BLE001 (an optimisation only: any failure leaves the workers to it)
        return


_BOX_STATES = "SPECDEBUG_SUITE_BOX_STATES"  # the run's parent of every test's box-side state folder


def _run_folder() -> str:
    """A folder of the run's own (removed when it ends; nothing goes into the home): one parent for
    every test's box-side state folder.  The box's drift hash cache sits beside the state folder
    (core.drift.snapshot.cache_path), keyed by path, size and mtime, so the suite's ~240 snapshots
    hash the venv's files once instead of once a test (0.35 CPU-s cold, 0.07 warm), as on a real
    box where one user's snapshots share it."""
    folder = tempfile.mkdtemp(prefix="specdebug-suite-")
    os.environ[_BOX_STATES] = os.path.join(folder, "box-states")
    os.makedirs(os.environ[_BOX_STATES], mode=0o700)
    # the box's bisection lock (core/bisect/boxlock.py; default /tmp, shared by every run on the
    # machine): the run's own, where no test has one of its own (box_state_dir)
    os.environ["SPECDEBUG_BISECT_LOCKS"] = os.environ[_BOX_STATES]
    return folder


_RUN_TAG = pytest.StashKey[str]()
_RUN_FOLDER = pytest.StashKey[str]()


@pytest.hookimpl(trylast=True)  # after xdist's own sessionfinish has ended the workers
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    clifork.close()  # this process's CLI fork server (tests/clifork.py), in every process
    tag = session.config.stash.get(_RUN_TAG, None)
    if tag is None or not _runs_the_session(session.config):
        return
    root = session.config._tmp_path_factory.getbasetemp()  # noqa: SLF001 (the run's folder, workers' too)
    left = leakcheck.left_running(tag, root=root)
    if not left:
        return
    survivors = leakcheck.end(left, tag)
    report = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = [f"{len(left)} process(es) the suite started still ran after it ended (now ended):"]
    lines += [f"  {p.line()}" for p in left]
    lines += [f"  NOT ENDED: {p.line()}" for p in survivors]
    for line in lines:
        if report is not None:
            report.write_line(line, red=True)
        else:
            print(line)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session", autouse=True)
def _own_data_dirs(tmp_path_factory):
    """Journals from verbs run without --session go to a test folder, not the user's data dir."""
    os.environ.setdefault("SPECDEBUG_SESSION", str(tmp_path_factory.mktemp("session")))
    yield


@pytest.fixture(scope="session", autouse=True)
def _sim_ports_of_this_worker():
    """Every sim this worker's tests start, in-process or through a CLI run, draws its port from the
    worker's own block (tests/ports.py), not from the range all workers share: a sim's port is free
    when drawn and bound only at the end of its startup, seconds later on a loaded machine, and a sim
    of another worker drew the same one in between (test_sim_cluster: node 0 could not bind)."""
    os.environ[PORTS_VAR] = ports.sim_block()
    yield


@pytest.fixture(autouse=True)
def _keep_toasts(monkeypatch):
    """Every App keeps each toast it raises (tests.tui.pilotwait.toasts): a toast expires after its
    timeout, and a test that looks after a loaded machine's stall found none.  Only where the test
    module imported Textual (nothing is imported for the others)."""
    textual_app = sys.modules.get("textual.app")
    if textual_app is None:
        return
    notify = textual_app.App.notify

    def keeping(self, message, *args, **kwargs):
        said = (str(message), str(kwargs.get("severity", "information")))
        self.__dict__.setdefault("_toasts_in_test", []).append(said)
        return notify(self, message, *args, **kwargs)

    monkeypatch.setattr(textual_app.App, "notify", keeping)


@pytest.fixture(autouse=True)
def box_state_dir(monkeypatch):
    """This test's own folder for server records on the box (the box is this machine).

    Every BoxClient and every CLI run the test starts reads SPECDEBUG_STATE_DIR, so no test writes
    records into the box user's real home, and parallel runs never see each other's servers.  The
    folders are siblings in the run's folder (_run_folder: the drift hash cache beside them is one)."""
    path = Path(tempfile.mkdtemp(prefix="servers-", dir=os.environ[_BOX_STATES]))  # made at configure
    monkeypatch.setenv("SPECDEBUG_STATE_DIR", str(path))
    monkeypatch.setenv("SPECDEBUG_BISECT_LOCKS", str(path))  # the box's bisection lock: this test's own
    return path


@pytest.fixture(scope="session")
def sshd(tmp_path_factory) -> Sshd:
    if SSHD is None:  # .ci/run installs it (and forbids this skip); a laptop without it runs the rest
        if os.environ.get("SPECDEBUG_REQUIRE_SSHD"):
            pytest.fail("SPECDEBUG_REQUIRE_SSHD is set but OpenSSH sshd is not installed")
        pytest.skip("OpenSSH sshd not installed (apt-get install openssh-server): real-SSH tests skipped")
    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


@pytest.fixture
async def remote(sshd: Sshd):
    r = ssh_box(sshd.alias, ssh_config=sshd.config_path, keepalive_interval=1.0, connect_timeout=5.0)
    await r.start()
    await r.wait_connected(15)
    yield r
    await r.close()


# --- parallel runs (pytest-xdist, `-n auto` in pyproject's addopts) ---------------------------------
# Each worker is its own process: its own session fixtures (sshd on a free port, SPECDEBUG_SESSION),
# its own tmp_path_factory folder (basetemp/gwN) and its own tmux socket (named with its PID).


def _workers() -> int:
    """Most tests wait on servers, sshd and tmux, not on a CPU: 2.5 workers a core (5 on the 2 cores
    of CI), at most 8.  On the idle 2-core machine 4 workers left the CPUs 20% idle and took 320-330 s;
    5 took 277 s at 12% idle; 6 took 269 s at 5% idle, with no headroom left for a load spike."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 2
    return max(2, min(8, round(2.5 * cpus)))


WORKERS = _workers()


@pytest.hookimpl(optionalhook=True)  # xdist's hook
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: WORKERS for the suite or a folder; a run of one test file stays in this process
    (starting workers would cost more than it saves).  An explicit `-n 0` / `-n N` decides instead."""
    files = {arg.split("::")[0] for arg in config.args}
    if len(files) == 1 and Path(next(iter(files))).is_file():
        return 0
    return WORKERS


def _shares_state_across_tests(item: pytest.Item) -> bool:
    """The test uses a module/class/package fixture: its file must run on one worker, so that the
    fixture (a sim, a bisection) is set up once, not once per worker that gets one of its tests.

    A file marked `spread` says its module fixture is cheap and may be set up on every worker that
    runs one of its tests (two loopback sshds: 0.2 s); its long tests then run side by side instead
    of one after another on one worker (test_deployment.py alone was 250 s of one worker's time)."""
    if item.get_closest_marker("spread") is not None:
        return False
    defs = item._fixtureinfo.name2fixturedefs  # noqa: SLF001 (pytest's own record of the item's fixtures)
    return any(d.scope in ("module", "class", "package") for fixdefs in defs.values() for d in fixdefs)


@pytest.hookimpl(tryfirst=True)  # before xdist's worker hook turns the marks into scheduling groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In a worker: a file whose tests share a module fixture is one group (xdist sends groups first);
    then files with a `slow` test, so the long ones do not end the run; `exclusive` tests last, when
    little else is left to wait for them."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return  # one process: the files' own order
    grouped = {_file(item) for item in items if _shares_state_across_tests(item)}
    slow = {_file(item) for item in items if item.get_closest_marker("slow") is not None}
    for item in items:
        if _file(item) in grouped and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(_file(item)))
    items.sort(key=lambda item: 2 if _exclusive(item) else 0 if _file(item) in slow else 1)


def _file(item: pytest.Item) -> str:
    return item.nodeid.split("::")[0]


def _exclusive(item: pytest.Item | None) -> bool:
    return item is not None and item.get_closest_marker("exclusive") is not None


class _Turns:
    """A readers-writer lock over files shared by this run's workers (flock).  A normal test holds a
    shared turn; an `exclusive` one (it loads the CPUs itself or judges timing) holds the only turn.
    The gate gives a waiting exclusive test priority (no new test starts meanwhile: no starvation);
    a run of exclusive tests keeps the turn from one to the next."""

    def __init__(self) -> None:
        self.gate = self.turn = -1

    @staticmethod
    def _lock(path: Path, mode: int) -> int:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, mode)
        return fd

    def acquire(self, root: Path, exclusive: bool) -> None:
        if self.turn >= 0:
            return  # kept from the exclusive test before
        self.gate = self._lock(root / "turn-gate.lock", fcntl.LOCK_EX)
        self.turn = self._lock(root / "turn.lock", fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        if not exclusive:
            self.gate = self._close(self.gate)  # other shared turns may start alongside

    def release(self) -> None:
        self.turn = self._close(self.turn)
        self.gate = self._close(self.gate)

    @staticmethod
    def _close(fd: int) -> int:
        if fd >= 0:
            os.close(fd)
        return -1


_TURNS = _Turns()


@pytest.hookimpl(tryfirst=True, hookwrapper=True)  # outermost: waiting for a turn is not test time
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        yield  # one process: nothing runs alongside
        return
    root = item.config._tmp_path_factory.getbasetemp().parent  # noqa: SLF001 (this run's workers share it)
    _TURNS.acquire(root, _exclusive(item))
    try:
        yield
    finally:
        if not (_exclusive(item) and _exclusive(nextitem)):
            _TURNS.release()
