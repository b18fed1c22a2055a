"""Every verb that takes -c PROFILE reads a bad profile the same way: exit 2, one line naming the
verb, the file, the line and the field, no traceback, and nothing contacted (the profile is checked
before any connection; the host given is loopback all the same)."""

from __future__ import annotations

import sys

import pytest

from tests import clifork

VERBS = ["launch", "restart", "stop", "status", "attach", "bench", "metrics", "env"]


@pytest.fixture(scope="module")
def bad_profile(tmp_path_factory):
    path = tmp_path_factory.mktemp("profiles") / "bad.toml"
    path.write_text('name = "bad"\n[server]\nargv = ["python3"]\nport = "eighty"\n', encoding="utf-8")
    return path


@pytest.mark.parametrize("verb", VERBS)
def test_bad_profile_is_one_line_and_exit_2(verb, bad_profile):
    r = clifork.run(
        [sys.executable, "-m", "specdebug.cli", verb, "127.0.0.1", "-c", str(bad_profile)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert lines[0].startswith(f"specdebug: {verb}: "), lines
    assert "bad.toml" in lines[0] and "port" in r.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["scan", "{log}"],
        ["grep", "{log}", "-e", "x"],
        ["bisect", "127.0.0.1", "--good", "{bad}", "--bad", "{bad}"],
    ],
    ids=["scan", "grep", "bisect"],
)
def test_verbs_with_other_arguments_read_a_bad_profile_the_same_way(argv, bad_profile, tmp_path):
    log = tmp_path / "server.log"
    log.write_text("hello\n", encoding="utf-8")
    words = [w.format(log=log, bad=bad_profile) for w in argv]
    if argv[0] != "bisect":
        words += ["-c", str(bad_profile)]
    r = clifork.run(
        [sys.executable, "-m", "specdebug.cli", *words], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    first = [line for line in r.stderr.splitlines() if line.strip()][0]
    assert first.startswith(f"specdebug: {argv[0]}: ") and "bad.toml" in first, first


@pytest.mark.parametrize("verb", ["launch", "metrics", "env"])
def test_missing_profile_file_is_named(verb, tmp_path):
    missing = tmp_path / "nowhere.toml"
    r = clifork.run(
        [sys.executable, "-m", "specdebug.cli", verb, "127.0.0.1", "-c", str(missing)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "nowhere.toml" in r.stderr and "Traceback" not in r.stderr
