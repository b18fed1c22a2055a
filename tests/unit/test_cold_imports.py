"""A cold one-shot verb starts its OpenSSH master right after its arguments are parsed (cli.run_verb):
its parser must not import the models the verb runs with, or the handshake waits for them (issue 43:
`env`'s parser imported the env model, ~0.4 s, before its connection could start)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from specdebug.verbs.connecting import OPENSSH_VERBS

ARGV = {"status": ["box", "-c", "p.toml"], "env": ["box", "--pid", "1"]}
HEAVY = ("pydantic", "asyncssh", "specdebug.core.env", "specdebug.core.deployment", "specdebug.engines")


@pytest.mark.parametrize("verb", sorted(OPENSSH_VERBS))
def test_a_one_shot_verbs_parser_imports_nothing_it_runs_with(verb: str) -> None:
    code = (
        "import json, sys\n"
        "from specdebug.verbs.table import verb_parser\n"
        f"verb_parser({verb!r}).parse_known_args({ARGV[verb]!r})\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.startswith({HEAVY!r}))))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == []
