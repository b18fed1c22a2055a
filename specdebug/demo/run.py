"""The demo: loopback SSH server + the simulated box + the TUI, and a clean exit.

The sim is launched by the startup pane exactly as on a real box (detached, own process group,
recorded in this run's own state folder on the box side), so the demo shows the real flow and two
demos never touch each other's servers.  On exit (q, Ctrl+C,
SIGTERM, SIGHUP) the recorded server is stopped through the same core `stop`, and every process
the loopback server ran is killed.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

from specdebug.core.profiles import Profile, load_profile
from specdebug.remote.factory import ConnectOptions, SSHOptions, connect_host
from specdebug.resources import data_dirs, example_profile
from specdebug.sim.box.loopback_sshd import LoopbackSSHServer
from specdebug.sim.box.ports import free_port

logger = logging.getLogger(__name__)

DEFAULT_PROFILE = "eagle3-2step-nccl.toml"


def find_example(name: str) -> Path:
    """A profile path, or a name in examples/ (the checkout's, else the copy shipped in the wheel)."""
    p = Path(name).expanduser()
    if p.is_file():
        return p
    example = example_profile(name)
    if example is not None:
        return example
    dirs = data_dirs("examples")
    where = ", ".join(str(d) for d in dirs) or "no examples/ folder found (a broken install?)"
    raise FileNotFoundError(f"demo profile {name!r} not found (looked in: {where})")


def demo_session(session: str | None) -> Path:
    """The demo journals like any session (user data dir), so `specdebug history` finds it."""
    from specdebug.core.journal import Journal

    if session:
        return Path(session).expanduser()
    env = os.environ.get("SPECDEBUG_SESSION")
    return Path(env).expanduser() if env else Journal.default_dir()


def demo_profile(
    path: Path, workdir: Path, time_scale: float | None = None, *, sim_args: list[str] | None = None
) -> Profile:
    """The example profile on a free port with a temp log, run by this very Python (+ sim_args)."""
    profile = load_profile(path)
    port = free_port()
    argv = list(profile.server.argv)
    if argv and argv[0] in ("python3", "python"):
        argv[0] = sys.executable
    if "--port" in argv:
        argv[argv.index("--port") + 1] = str(port)
    else:
        argv += ["--port", str(port)]
    if time_scale is not None:
        if "--time-scale" in argv:
            argv[argv.index("--time-scale") + 1] = str(time_scale)
        else:
            argv += ["--time-scale", str(time_scale)]
    argv += sim_args or []
    server = profile.server.model_copy(
        update={"argv": argv, "port": port, "log_file": str(workdir / f"{profile.name}.log")}
    )
    return profile.model_copy(update={"name": f"demo-{profile.name}", "server": server})


async def _stop_server(config: Path, alias: str, profile: Profile, state_dir: Path) -> None:
    from specdebug.core.control.actions import stop

    remote = connect_host(alias, ConnectOptions(ssh=SSHOptions(ssh_config=config), state_dir=str(state_dir)))
    try:
        await remote.wait_connected(5)
        await asyncio.wait_for(stop(remote, profile, grace_s=3.0), 15)
    finally:
        await remote.close()


def _kill_recorded_group(profile: Profile, since: float, state_dir: Path) -> None:
    """Last resort when the SSH path fails (the demo box is this machine): kill the group this
    run launched, and only if its leader is still the very process recorded (no reused PID)."""
    from specdebug.core.control.records import ServerRecord

    state = state_dir / f"{profile.name}.json"
    try:
        record = ServerRecord.model_validate_json(state.read_text())
        if record.stopped_at is not None or record.started_at < since:
            return
        stat = Path(f"/proc/{record.pid}/stat").read_text()
        fields = stat[stat.rfind(")") + 2 :].split()
        if int(fields[2]) == record.pgid and int(fields[19]) == record.start_ticks:
            os.killpg(record.pgid, signal.SIGKILL)
    except (OSError, ValueError):
        return


def run_demo(
    profile_name: str = DEFAULT_PROFILE,
    *,
    layout: str = "default",
    autolaunch: bool = True,
    time_scale: float | None = None,
    session: str | None = None,
    sim_args: list[str] | None = None,
) -> int:
    from specdebug.tui.app import SpecdebugApp, binding_ids, load_keymap
    from specdebug.tui.context import AppContext, BisectPreset

    started = time.time()
    workdir = Path(tempfile.mkdtemp(prefix="specdebug-demo-box-"))
    state_dir = workdir / "servers"  # the demo box's own server records (the box is this machine)
    try:
        profile = demo_profile(find_example(profile_name), workdir, time_scale, sim_args=sim_args)
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    server = LoopbackSSHServer(alias="simbox")
    server.start()

    by_signal: list[int] = []
    profiles = [profile]  # every profile the user picked may have a server to stop at exit
    cleaned = threading.Lock()  # held by whoever cleans up; the other waits for it, then leaves
    done: list[bool] = []

    def clean_up() -> None:
        """Stop every server the demo launched, the loopback server, and remove the demo box; once."""
        with cleaned:
            if done:
                return
            for picked in profiles:
                try:
                    asyncio.run(_stop_server(server.config_path, "simbox", picked, state_dir))
                except (Exception, KeyboardInterrupt):  # the group is killed below either way
                    logger.debug("stopping %s failed", picked.name, exc_info=True)
                _kill_recorded_group(picked, started, state_dir)
            server.stop()
            # the demo box's log, records and throwaway ssh keys: nothing of it stays in the temp folder
            # (the journal, in the user's data folder, is what the demo keeps)
            for folder in (workdir, server.dir):
                shutil.rmtree(folder, ignore_errors=True)
            done.append(True)

    def leave_by_signal() -> None:
        """The terminal is gone (or TERM came): clean up, then leave.  Not through the app's own
        exit: a SystemExit raised into its loop left asyncio cancelling tasks that never ended (the
        process outlived its terminal by 45 s under load, test_demo's hangup test), and what is left
        after the cleanup is a UI without a screen (a box request still waiting, an executor's worker)."""
        try:
            clean_up()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(by_signal[0])

    def on_signal(signum, frame):  # SIGTERM/SIGHUP: the same cleanup as q, beside the app
        if by_signal:
            return  # a second TERM/HUP (tmux kill-server) must not cut the cleanup short
        by_signal.append(128 + signum)
        threading.Thread(target=leave_by_signal, name="specdebug-demo-leave", daemon=True).start()

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGHUP)}

    def load(path: Path) -> Profile:
        picked = demo_profile(path, workdir, time_scale, sim_args=sim_args)
        profiles.append(picked)
        return picked

    example_dir = find_example(profile_name).resolve().parent
    try:
        remote = connect_host(
            "simbox", ConnectOptions(ssh=SSHOptions(ssh_config=server.config_path), state_dir=str(state_dir))
        )
        ctx = AppContext(
            remotes={"simbox": remote},
            selected="simbox",
            profile=profile,
            profile_path=find_example(profile_name),
            profile_choices=[
                p for p in sorted(example_dir.glob("*.toml")) if "specdebug.sim" in p.read_text()
            ],
            profile_loader=load,
        )
        from specdebug.core.journal import Journal

        ctx.session_dir = demo_session(session)
        ctx.journal = Journal(ctx.session_dir)
        app = SpecdebugApp(ctx, layout=layout, keymap=load_keymap(known=binding_ids()))
        if autolaunch:
            app.autorun = ["startup.launch"]
        # the Bisect pane offers the story's bisection (its short benchmarks); what it launches is stopped at exit
        good, bad = find_example("eagle3-2step-nccl.toml"), find_example("eagle3-3step.toml")
        ctx.bisect_preset = BisectPreset(good, bad, {"requests": 2, "output_len": 128})
        ctx.launched_profiles = profiles
        app.run()
    finally:
        # a TERM/HUP from here on (the terminal closing while we stop: tmux kill-server) must not cut
        # this short: it left the whole sim running; Ctrl+C here skips to the kill in clean_up
        for s in old:
            signal.signal(s, signal.SIG_IGN)
        clean_up()  # or wait for the signal's cleanup, which then leaves
        for s, handler in old.items():
            signal.signal(s, handler)
        if by_signal:
            leave_by_signal()
    if (ctx.session_dir / "events.jsonl").is_file():
        print(f"specdebug demo: journal in {ctx.session_dir} (`specdebug history`, `specdebug report`)")
    return 0
