"""The core and the remote layer stay headless: they never import textual."""

import subprocess
import sys


def test_core_and_remote_do_not_import_textual():
    code = (
        "import importlib, pkgutil, sys\n"
        "import specdebug.core, specdebug.remote\n"
        "for pkg in (specdebug.core, specdebug.remote):\n"
        "    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
        "        importlib.import_module(m.name)\n"
        "bad = sorted(n for n in sys.modules if n == 'textual' or n.startswith('textual.'))\n"
        "assert not bad, bad[:5]\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
