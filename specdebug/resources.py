"""Where the top-level `examples/` and `layouts/` folders are, in a checkout and in a wheel.

They stay top-level folders in the repository (users look there first); a built wheel carries a
copy as `specdebug/_data/<name>/` (setup.py's build step), so `pip install`/pipx users get them too.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
DATA_NAMES = ("examples", "layouts")


def data_dirs(name: str) -> list[Path]:
    """Existing folders named `name`: the checkout's (editable install) first, then the wheel's."""
    out = []
    repo = PACKAGE_DIR.parent
    if (repo / "pyproject.toml").is_file() and (repo / name).is_dir():
        out.append(repo / name)
    packaged = PACKAGE_DIR / "_data" / name
    if packaged.is_dir():
        out.append(packaged)
    return out


def data_dir(name: str) -> Path | None:
    dirs = data_dirs(name)
    return dirs[0] if dirs else None


def example_profile(name: str) -> Path | None:
    """The example profile a bare NAME or NAME.toml means (`-c baseline`), when no file of that name is
    here: every verb that takes -c accepts what `demo -c NAME` does."""
    if "/" in name or Path(name).expanduser().exists():
        return None
    for d in data_dirs("examples"):
        for candidate in (d / name, d / f"{name}.toml"):
            if candidate.suffix == ".toml" and candidate.is_file():
                return candidate
    return None


def profile_path(name: str) -> Path:
    """The file `-c NAME` means: the path as given, else the example of that name."""
    return example_profile(name) or Path(name).expanduser()
