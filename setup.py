"""Build step only (metadata lives in pyproject.toml): copy the top-level `examples/` and `layouts/`
into the wheel as `specdebug/_data/`, where specdebug.resources finds them after `pip install`."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

DATA = ("examples", "layouts")


class BuildPyWithData(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:  # an editable install reads the checkout's folders directly
            return
        root = Path(__file__).resolve().parent
        for name in DATA:
            src = root / name
            if not src.is_dir():
                raise SystemExit(f"setup.py: {src} is missing (the sdist must include it: MANIFEST.in)")
            dst = Path(self.build_lib) / "specdebug" / "_data" / name
            shutil.rmtree(dst, ignore_errors=True)
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


setup(cmdclass={"build_py": BuildPyWithData})
