"""What one Python process of this venv pays to start, against the same interpreter without `site`.

Why: a test run starts about 2,600 Python processes (verbs, sims and their spawned workers, box
helpers), each through `site`.  setuptools' default editable install adds an import hook (its
`__editable___*_finder`, loaded from a .pth at every start: pathlib, re, urllib.parse...);
`pip install -e . --config-settings editable_mode=compat` (the README's test command) writes a plain
path line instead.  The baseline, `python -S -c pass`, is measured in the same run.

    python tests/perf/bench_interpreter_start.py [--runs 40]

Prints CPU ms per start for both, their ratio, whether the editable hook is loaded, and a RESULT line.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys


def cpu_ms_per_start(argv: list[str], runs: int) -> float:
    """Children's user+sys CPU over `runs` starts, per start."""
    before = os.times()
    for _ in range(runs):
        subprocess.run(argv, check=True)
    after = os.times()
    used = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return used * 1000.0 / runs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=40)
    args = ap.parse_args()
    py = sys.executable
    hook = subprocess.run(
        [py, "-c", "import sys; print(any('__editable__' in m for m in sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    bare = cpu_ms_per_start([py, "-S", "-c", "pass"], args.runs)
    full = cpu_ms_per_start([py, "-c", "pass"], args.runs)
    print(f"python -S -c pass: {bare:.1f} ms CPU per start (baseline)")
    print(f"python -c pass:    {full:.1f} ms CPU per start (site, this venv's .pth files)")
    print(f"editable import hook loaded at start: {hook}")
    print(f"RESULT start_cpu_ratio={full / bare:.2f} site_cost_ms={full - bare:.1f} editable_hook={hook}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
