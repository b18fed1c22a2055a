"""An in-process SSH server on 127.0.0.1 with throwaway keys, for the demo.

Why SSH at all for a local demo: the demo must exercise the very code a real GPU box uses
(the SSH transport, the probe helper, streams, forwards, host-key checks).  Why in-process rather than
OpenSSH: `specdebug demo` must work with nothing installed.  It runs in its own thread and
event loop so the TUI's loop never waits on it.  Commands run as local processes in their own
session; a session's process group is killed when its channel closes, and every group still
alive is killed when the server stops, so the demo leaves nothing behind.  The box has no GPU:
its commands find a simulated `nvidia-smi` first on PATH (specdebug.sim.box.nvidia_smi), fed by the
sims they launch through $SPECDEBUG_SIM_GPU_DIR; nothing is installed outside the demo's folder.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import os
import signal
import tempfile
import threading
from pathlib import Path

import asyncssh

from specdebug.sim.box import nvidia_smi


class _Server(asyncssh.SSHServer):
    def connection_requested(self, dest_host, dest_port, orig_host, orig_port):  # allow local forwards
        return dest_host in ("127.0.0.1", "localhost", "::1")


class LoopbackSSHServer:
    """start() -> writes an ssh_config with alias `alias`; stop() kills everything it ran."""

    def __init__(self, alias: str = "simbox") -> None:
        self.alias = alias
        self.dir = Path(tempfile.mkdtemp(prefix="specdebug-demo-"))
        self.config_path = self.dir / "ssh_config"
        self.bin_dir = self.dir / "bin"  # first on the box's PATH: the simulated nvidia-smi
        self.gpu_dir = self.dir / "gpus"  # the sims' GPU load files
        self.port = 0
        self._groups: set[int] = set()
        self._sessions: set[asyncio.Task] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncssh.SSHAcceptor | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    # ---- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="loopback-sshd", daemon=True)
        self._thread.start()
        self._ready.wait(15)
        if self._error:
            raise self._error
        if not self.port:
            raise RuntimeError("loopback ssh server did not start")

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._listen())
        except BaseException as exc:  # report to start()
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        self._loop.run_forever()
        with contextlib.suppress(Exception):
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
        self._loop.close()

    def box_env(self) -> dict[str, str]:
        """Environment of every command the box runs: the simulated GPUs come first on PATH."""
        env = dict(os.environ)
        env.pop("TEXTUAL", None)
        env["PATH"] = os.pathsep.join([str(self.bin_dir), env.get("PATH", os.defpath)])
        env[nvidia_smi.ENV_DIR] = str(self.gpu_dir)
        return env

    async def _listen(self) -> None:
        nvidia_smi.write_shim(self.bin_dir)
        host_key = asyncssh.generate_private_key("ssh-ed25519")
        client_key = asyncssh.generate_private_key("ssh-ed25519")
        key_path = self.dir / "client_key"
        client_key.write_private_key(str(key_path))
        key_path.chmod(0o600)
        self._server = await asyncssh.listen(
            "127.0.0.1",
            0,
            server_host_keys=[host_key],
            authorized_client_keys=asyncssh.import_authorized_keys(client_key.export_public_key().decode()),
            server_factory=_Server,
            process_factory=self._handle,
            encoding=None,
            keepalive_interval=0,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        (self.dir / "known_hosts").write_text(
            f"[127.0.0.1]:{self.port} {host_key.export_public_key().decode().strip()}\n"
        )
        self.config_path.write_text(
            f"Host {self.alias}\n"
            "  HostName 127.0.0.1\n"
            f"  Port {self.port}\n"
            f"  User {getpass.getuser()}\n"
            f"  IdentityFile {key_path}\n"
            "  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {self.dir / 'known_hosts'}\n"
        )

    def stop(self) -> None:
        for pgid in list(self._groups):
            with contextlib.suppress(OSError):
                os.killpg(pgid, signal.SIGKILL)
        self._groups.clear()
        loop = self._loop
        if loop is not None and loop.is_running():

            async def shutdown() -> None:
                if self._server is not None:
                    self._server.close()
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(self._server.wait_closed(), 2)
                # sessions end by themselves once their (killed) processes are reaped; whatever is
                # left is cancelled and awaited, so no task or pipe outlives the loop
                if self._sessions:
                    await asyncio.wait(set(self._sessions), timeout=2)
                rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
                for task in rest:
                    task.cancel()
                if rest:
                    await asyncio.wait(rest, timeout=1)
                loop.stop()

            asyncio.run_coroutine_threadsafe(shutdown(), loop)
            if self._thread:
                self._thread.join(5)

    # ---- sessions -----------------------------------------------------------------------------
    async def _handle(self, process: asyncssh.SSHServerProcess) -> None:
        command = process.command or "sh"
        env = self.box_env()
        task = asyncio.current_task()
        if task is not None:
            self._sessions.add(task)
            task.add_done_callback(self._sessions.discard)
        proc = await asyncio.create_subprocess_exec(
            "/bin/sh",
            "-c",
            command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            env=env,
        )
        self._groups.add(proc.pid)
        child_in, child_out, child_err = proc.stdin, proc.stdout, proc.stderr
        assert child_in is not None and child_out is not None and child_err is not None  # all PIPE

        async def pump_out(src: asyncio.StreamReader, dst) -> None:
            while data := await src.read(65536):
                dst.write(data)
                with contextlib.suppress(Exception):
                    await dst.drain()

        async def pump_in() -> None:
            try:
                while data := await process.stdin.read(65536):
                    child_in.write(data)
                    await child_in.drain()
            except asyncssh.SignalReceived as sig:
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, getattr(signal, f"SIG{sig.signal}", signal.SIGTERM))
            except (asyncssh.Error, OSError, BrokenPipeError, ConnectionResetError):
                pass
            finally:
                with contextlib.suppress(Exception):
                    child_in.close()

        async def kill_on_close() -> None:
            await process.channel.wait_closed()
            if proc.returncode is None:
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGKILL)

        stdin_task = asyncio.create_task(pump_in())
        closer = asyncio.create_task(kill_on_close())
        try:
            await asyncio.gather(pump_out(child_out, process.stdout), pump_out(child_err, process.stderr))
            rc = await proc.wait()
        finally:
            stdin_task.cancel()
            self._groups.discard(proc.pid)
        with contextlib.suppress(Exception):
            process.exit(rc if rc >= 0 else 128 - rc)
        closer.cancel()
