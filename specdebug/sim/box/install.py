"""`specdebug sim install-box`: make this machine a simulated GPU box for this user, behind any sshd.

Why: the demo's in-process sshd (loopback_sshd.py) gives its commands a simulated `nvidia-smi`, a
GPU folder and the sim's Python; a real sshd gives a login none of that, and Debian refuses
`python3 -m pip install specdebug` (externally managed).  Run once on the box, as the user who will
log in, this puts everything under one folder of that user (default ~/.specdebug/simbox):

    venv/       a venv of its own (`python3 -m venv`, then pip installs specdebug: the checkout or
                wheel this specdebug came from, else `specdebug==VERSION` from the index)
    bin/        the simulated `nvidia-smi` (run by the venv's Python)
    gpus/       the sims' GPU load files ($SPECDEBUG_SIM_GPU_DIR)
    env.sh      PATH (bin/ and venv/bin first: `python3 -m specdebug.sim` finds the venv's),
                SPECDEBUG_SIM_GPU_DIR, SPECDEBUG_SIM_PORTS (a port block of this user's own)

and sources env.sh from a marked block at the TOP of the login shell's rc file: sshd runs a command
with the login shell, and Debian's ~/.bashrc returns at once when not interactive, so a line below
that `return` is never read by `ssh box CMD`.  Running it again rewrites the block in place (never
twice); `--remove` takes the block out and deletes the folder.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from specdebug.sim.box import nvidia_smi
from specdebug.sim.box.ports import PORTS_VAR

BLOCK_BEGIN = "# >>> specdebug sim box (specdebug sim install-box --remove takes it out) >>>"
BLOCK_END = "# <<< specdebug sim box <<<"
PORT_BASE, PORT_BLOCK, PORT_BLOCKS = 10000, 100, 100  # blocks of 10000-19999, as sim/box/ports.py's range
# what pip needs of a checkout to build the wheel; the rest (.git, .venv, caches, build output, files
# of test runs that may not even be readable by this user) stays behind
CHECKOUT_FILES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md")
CHECKOUT_DIRS = (
    "specdebug",
    "examples",
    "layouts",
    "scripts",
)  # scripts: the `specdebug` command (pyproject script-files)


class InstallError(Exception):
    """A step of the install failed; the message says which and what to do."""


@dataclass(frozen=True)
class BoxFolder:
    """Where one user's sim box lives."""

    root: Path

    @property
    def venv(self) -> Path:
        return self.root / "venv"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python3"

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def gpus(self) -> Path:
        return self.root / "gpus"

    @property
    def env_file(self) -> Path:
        return self.root / "env.sh"


def user_ports(uid: int) -> tuple[int, int]:
    """This user's block of sim ports (LOW, HIGH excluded): two users of one box rarely share one."""
    low = PORT_BASE + (uid % PORT_BLOCKS) * PORT_BLOCK
    return low, low + PORT_BLOCK


def rc_file(home: Path, shell: str) -> Path | None:
    """The file a non-interactive `ssh box CMD` makes the login shell read (None: it reads none)."""
    name = Path(shell).name
    if name == "bash":
        return home / ".bashrc"  # Debian's bash reads it for sshd's commands (SSH_SOURCE_BASHRC)
    if name == "zsh":
        return home / ".zshenv"
    return None


def env_script(box: BoxFolder, ports: tuple[int, int]) -> str:
    q = shlex.quote
    front = f"{box.bin}:{box.venv / 'bin'}"
    return (
        "# written by `specdebug sim install-box`: the simulated GPU box of this user\n"
        f'case ":$PATH:" in *:{q(front)}:*) ;; *) PATH={q(front)}:"$PATH" ;; esac\n'
        "export PATH\n"
        f"export {nvidia_smi.ENV_DIR}={q(str(box.gpus))}\n"
        f"export {PORTS_VAR}={ports[0]}-{ports[1]}\n"
    )


def without_block(text: str) -> str:
    """`text` with every block of ours taken out (an unfinished one: to the end)."""
    out, inside = [], False
    for line in text.splitlines(keepends=True):
        if line.rstrip("\n") == BLOCK_BEGIN:
            inside = True
        elif inside and line.rstrip("\n") == BLOCK_END:
            inside = False
        elif not inside:
            out.append(line)
    return "".join(out)


def with_block(text: str, env_file: Path) -> str:
    """`text` with our block at the top (before any `return` of a non-interactive shell), once."""
    path = shlex.quote(str(env_file))
    block = f"{BLOCK_BEGIN}\n[ -r {path} ] && . {path}\n{BLOCK_END}\n"
    return block + without_block(text)


def rewrite(path: Path, text: str) -> None:
    """Replace `path` with `text` through a temp file beside it, keeping its mode."""
    mode = path.stat().st_mode & 0o7777 if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def default_source() -> str:
    """What the venv installs: the checkout or wheel the running specdebug came from (PEP 610's
    direct_url.json, or the checkout around the package), else `specdebug==VERSION` from the index."""
    from importlib import metadata

    try:
        dist = metadata.distribution("specdebug")
    except metadata.PackageNotFoundError:
        dist = None
    if dist is not None:
        direct = json.loads(dist.read_text("direct_url.json") or "{}")
        url = urlparse(direct.get("url", ""))
        if url.scheme == "file" and Path(unquote(url.path)).exists():
            return unquote(url.path)
    checkout = Path(__file__).resolve().parents[3]
    if (checkout / "pyproject.toml").is_file() and (checkout / "specdebug").is_dir():
        return str(checkout)
    if dist is None:
        raise InstallError("cannot tell where this specdebug came from: give --from (a wheel or a checkout)")
    return f"specdebug=={dist.version}"


def _run(argv: list[str], what: str) -> None:
    print(f"  $ {shlex.join(argv)}", flush=True)
    r = subprocess.run(argv, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise InstallError(f"{what} failed (exit {r.returncode}): {shlex.join(argv)}")


def stage_checkout(src: Path, dst: Path) -> None:
    """Copy the files of checkout `src` that building the wheel needs (pip builds in its source folder,
    which need not be writable by this user)."""
    if not (src / "pyproject.toml").is_file():
        raise InstallError(f"{src} is not a specdebug checkout (no pyproject.toml)")
    dst.mkdir(parents=True)
    try:
        for name in CHECKOUT_FILES:
            if (src / name).is_file():
                shutil.copy2(src / name, dst / name)
        for name in CHECKOUT_DIRS:
            if not (src / name).is_dir():
                continue  # pip's build names what it misses
            shutil.copytree(src / name, dst / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    except (shutil.Error, OSError) as exc:
        first = exc.args[0][0] if isinstance(exc, shutil.Error) and exc.args[0] else exc
        raise InstallError(f"cannot copy the checkout {src}: {first}") from None


def make_venv(box: BoxFolder, source: str) -> None:
    """The venv and specdebug in it; a checkout is copied first (pip builds in the source folder)."""
    if not box.python.exists():
        base = getattr(sys, "_base_executable", None) or sys.executable
        _run([base, "-m", "venv", str(box.venv)], "creating the venv (Debian: apt-get install python3-venv)")
    src = Path(source).expanduser()
    if not src.is_dir():
        _run([str(box.python), "-m", "pip", "install", "--quiet", source], "pip install")
        return
    with tempfile.TemporaryDirectory(prefix="specdebug-src-") as tmp:
        staged = Path(tmp) / "specdebug"
        stage_checkout(src, staged)
        _run([str(box.python), "-m", "pip", "install", "--quiet", str(staged)], "pip install")


def check_box(box: BoxFolder) -> str:
    """The simulated `nvidia-smi -L` as a login will run it (the venv's specdebug imports)."""
    env = dict(os.environ, PATH=f"{box.bin}:{box.venv / 'bin'}:{os.environ.get('PATH', os.defpath)}")
    env[nvidia_smi.ENV_DIR] = str(box.gpus)
    r = subprocess.run(["nvidia-smi", "-L"], env=env, capture_output=True, text=True, timeout=60)
    if r.returncode != 0 or "GPU 0" not in r.stdout:
        raise InstallError(f"the simulated nvidia-smi does not run: {(r.stderr or r.stdout).strip()[-300:]}")
    return r.stdout


def install(box: BoxFolder, *, source: str, ports: tuple[int, int], home: Path, shell: str) -> list[str]:
    """Build the box folder and hook env.sh into the login shell; returns the report's lines."""
    box.root.mkdir(parents=True, exist_ok=True, mode=0o700)
    box.gpus.mkdir(exist_ok=True)
    make_venv(box, source)
    nvidia_smi.write_shim(box.bin, python=str(box.python))
    box.env_file.write_text(env_script(box, ports))
    gpus = check_box(box).count("GPU ")
    rc = rc_file(home, shell)
    lines = [
        f"sim box ready under {box.root}",
        f"  python3     {box.python} (specdebug from {source})",
        f"  nvidia-smi  {box.bin / 'nvidia-smi'}: {gpus} simulated GPUs, loads in {box.gpus}",
        f"  ports       {ports[0]}-{ports[1] - 1} for this user's sims (${PORTS_VAR}); a profile with a "
        "fixed port: change `--port` in [server] argv and `port`",
    ]
    if rc is None:
        lines.append(
            f"  env         {box.env_file}; your login shell {shell} reads no file for `ssh box CMD`: "
            f"`chsh -s /bin/bash`, then run this again (or put {box.python} as argv[0] in your profiles)"
        )
        return lines
    rewrite(rc, with_block(rc.read_text() if rc.exists() else "", box.env_file))
    lines.append(
        f"  env         {box.env_file}, sourced at the top of {rc} (before a non-interactive return)"
    )
    lines.append("from your machine: specdebug probe HOST   (undo here: specdebug sim install-box --remove)")
    return lines


def remove(box: BoxFolder, home: Path) -> list[str]:
    """Take our block out of every rc file it may be in and delete the box folder."""
    lines = []
    for rc in (home / ".bashrc", home / ".zshenv"):
        if rc.exists() and BLOCK_BEGIN in (text := rc.read_text()):
            rewrite(rc, without_block(text))
            lines.append(f"removed the sim box block from {rc}")
    if box.root.exists():
        shutil.rmtree(box.root)
        lines.append(f"deleted {box.root}")
    return lines or ["no sim box installed here"]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="specdebug sim install-box",
        description="Make this machine a simulated GPU box for this user behind its own sshd: a venv with "
        "specdebug, the simulated nvidia-smi and GPU folder, a port block, all seen by `ssh box CMD`.",
    )
    p.add_argument("--user", action="store_true", help="for this user only (the default and only mode)")
    p.add_argument(
        "--from",
        dest="source",
        metavar="SOURCE",
        help="what pip installs: a wheel, a checkout "
        "or a requirement (default: where this specdebug came from)",
    )
    p.add_argument("--dir", metavar="DIR", help="the box folder (default ~/.specdebug/simbox)")
    p.add_argument("--ports", metavar="LOW-HIGH", help="this user's sim ports (default: a block by uid)")
    p.add_argument("--remove", action="store_true", help="undo: the rc block out, the folder deleted")
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    me = pwd.getpwuid(os.getuid())
    home = Path(os.environ.get("HOME") or me.pw_dir)
    box = BoxFolder(Path(args.dir).expanduser() if args.dir else home / ".specdebug" / "simbox")
    try:
        if args.remove:
            lines = remove(box, home)
        else:
            ports = user_ports(me.pw_uid)
            if args.ports:
                low, _, high = args.ports.partition("-")
                if not (low.isdigit() and high.isdigit() and 1024 <= int(low) < int(high) <= 65536):
                    raise InstallError(
                        f"--ports {args.ports!r}: expected LOW-HIGH, 1024 <= LOW < HIGH <= 65536"
                    )
                ports = (int(low), int(high))
            lines = install(
                box,
                source=args.source or default_source(),
                ports=ports,
                home=home,
                shell=me.pw_shell or "/bin/sh",
            )
    except (InstallError, OSError) as exc:
        print(f"specdebug sim install-box: {exc}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0
