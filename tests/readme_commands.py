"""The README's two set-up commands, read from the README itself (stdlib only).

`.ci/run` runs the test command through this module (`python3 tests/readme_commands.py tests`), so
CI runs exactly what the README says; tests/unit/test_readme_commands.py checks both commands' shape.
"""

from __future__ import annotations

import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
LEADS = {"demo": "Run the demo", "tests": "Run the tests"}


def readme_commands(text: str) -> dict[str, str]:
    """{"demo": ..., "tests": ...}: the first indented (code) line after each lead-in of the README's
    set-up section.  A missing one is an error naming the lead-in."""
    section = text.split("## Set up", 1)[-1].split("\n## ", 1)[0]
    found: dict[str, str] = {}
    for key, lead in LEADS.items():
        if lead not in section:
            raise ValueError(f"README.md set-up section has no {lead!r} paragraph")
        after = section.split(lead, 1)[1].splitlines()[1:]
        code = [line.strip() for line in after if line.startswith("    ") and line.strip()]
        if not code:
            raise ValueError(f"README.md: no command under {lead!r}")
        found[key] = code[0]
    return found


if __name__ == "__main__":
    print(readme_commands(README.read_text(encoding="utf-8"))[sys.argv[1]])
