"""Profiles: loading, extends, one-line errors naming file/line/field, knobs, diffs, fingerprints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specdebug.core.profiles import (
    Profile,
    ProfileError,
    diff_profiles,
    find_key_line,
    load_profile,
    load_profile_text,
    profile_schema,
    split_argv,
)
from specdebug.core.profiles.model import default_log_dir

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

MINIMAL = """\
name = "p"
[server]
argv = ["python3", "-m", "sglang.launch_server", "--port", "30001", "--tp", "8"]
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def error_of(path: Path) -> ProfileError:
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    msg = str(info.value)
    assert "\n" not in msg
    return info.value


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.toml")), ids=lambda p: p.name)
def test_every_example_loads(path: Path) -> None:
    profile = load_profile(path)
    assert profile.name == path.stem
    assert profile.server.argv and profile.server.port > 0
    # the per-user default (~/.specdebug/servers/logs/NAME.log on the box): a shared folder such as
    # /tmp/specdebug is taken by the first user of the box and refused to every other one
    assert profile.server.log_file == f"{default_log_dir()}/{profile.name}.log"


def test_example_ports_are_distinct() -> None:
    ports = [load_profile(p).server.port for p in EXAMPLES.glob("*.toml")]
    assert len(ports) == len(set(ports))


def test_defaults_filled(tmp_path: Path) -> None:
    p = load_profile(write(tmp_path, "p.toml", MINIMAL))
    assert p.server.port == 30001  # from --port in argv
    assert p.server.log_file == f"{default_log_dir()}/p.log"
    assert p.server.kind == "sglang" and p.server.spt_noenv is True
    assert p.ready.health == "/health" and p.ready.require_ready_line and p.ready.timeout_s == 900
    assert p.bench.command is None and p.bench.requests > 0


def test_name_defaults_to_file_stem_and_is_not_inherited(tmp_path: Path) -> None:
    write(tmp_path, "base.toml", MINIMAL)
    child = load_profile(write(tmp_path, "child.toml", 'extends = "base.toml"\n'))
    assert child.name == "child"
    assert child.extends_chain == [(tmp_path / "base.toml").resolve()]


def test_extends_overrides_and_merges_tables(tmp_path: Path) -> None:
    write(tmp_path, "base.toml", MINIMAL + 'env = { A = "1", B = "2" }\n[ready]\ntimeout_s = 60\n')
    sub = tmp_path / "sub"
    sub.mkdir()
    child = load_profile(
        write(
            sub,
            "c.toml",
            'name = "c"\nextends = "../base.toml"\n[server]\nenv = { B = "3" }\nkind = "custom"\n',
        )
    )
    assert child.server.env == {"A": "1", "B": "3"}
    assert child.server.kind == "custom"
    assert child.server.argv[0] == "python3"
    assert child.ready.timeout_s == 60


def test_bad_toml_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.toml", 'name = "x"\n[server]\nargv = ["a",\nport = \n')
    err = error_of(path)
    assert str(path) in str(err) and err.line == 4
    assert "invalid TOML" in str(err)


def test_unknown_key_names_line_and_field(tmp_path: Path) -> None:
    path = write(tmp_path, "u.toml", MINIMAL + "kind = 'sglang'\nlogfile = '/tmp/x.log'\n")
    err = error_of(path)
    assert err.line == 5 and err.field == "server.logfile"
    assert f"{path}:5: server.logfile: unknown key 'logfile' in [server]" in str(err)
    assert "log_file" in str(err)  # the known keys are listed


def test_unknown_top_level_key(tmp_path: Path) -> None:
    err = error_of(write(tmp_path, "u.toml", 'nmae = "x"\n' + MINIMAL))
    assert err.line == 1 and err.field == "nmae"


def test_wrong_type_names_line_and_field(tmp_path: Path) -> None:
    path = write(tmp_path, "t.toml", MINIMAL + '[ready]\nhealth = "/health"\ntimeout_s = "soon"\n')
    err = error_of(path)
    assert err.line == 6 and err.field == "ready.timeout_s"
    assert "wrong type" in str(err) and "a string" in str(err)


def test_wrong_type_inside_inline_table(tmp_path: Path) -> None:
    path = write(tmp_path, "t.toml", MINIMAL + 'env = { NCCL_PROTO = "LL", NCCL_P2P_LEVEL = 5 }\n')
    err = error_of(path)
    assert err.line == 4 and err.field == "server.env.NCCL_P2P_LEVEL"


def test_wrong_type_in_array_item(tmp_path: Path) -> None:
    path = write(tmp_path, "t.toml", 'name = "p"\n[server]\nkind = "sglang"\nargv = ["python3", 8]\n')
    err = error_of(path)
    assert err.line == 4 and err.field == "server.argv.1"


def test_missing_argv(tmp_path: Path) -> None:
    path = write(tmp_path, "m.toml", 'name = "m"\n\n[server]\nport = 30000\n')
    err = error_of(path)
    assert err.line == 3 and err.field == "server.argv"
    assert "missing required key" in str(err)


def test_missing_server_table(tmp_path: Path) -> None:
    err = error_of(write(tmp_path, "m.toml", 'name = "m"\n'))
    assert err.field == "server" and "argv" in str(err)


def test_empty_argv(tmp_path: Path) -> None:
    err = error_of(write(tmp_path, "m.toml", 'name = "m"\n[server]\nargv = []\n'))
    assert err.line == 3 and err.field == "server.argv"


def test_extends_cycle(tmp_path: Path) -> None:
    write(tmp_path, "a.toml", 'extends = "b.toml"\n' + MINIMAL)
    b = write(tmp_path, "b.toml", '# b\nextends = "a.toml"\n')
    err = error_of(tmp_path / "a.toml")
    assert "extends cycle: a.toml -> b.toml -> a.toml" in str(err)
    assert err.file == b.resolve() and err.line == 2 and err.field == "extends"


def test_extends_self_and_missing(tmp_path: Path) -> None:
    assert "cycle" in str(error_of(write(tmp_path, "s.toml", 'extends = "s.toml"\n' + MINIMAL)))
    err = error_of(write(tmp_path, "x.toml", 'extends = "nope.toml"\n' + MINIMAL))
    assert "not found" in str(err) and err.line == 1


def test_error_points_into_the_extended_file(tmp_path: Path) -> None:
    base = write(tmp_path, "base.toml", MINIMAL + "[ready]\n\ntimeout_s = false\n")
    err = error_of(write(tmp_path, "child.toml", 'extends = "base.toml"\n'))
    assert err.file == base.resolve() and err.line == 6 and err.field == "ready.timeout_s"


def test_port_conflict_and_custom_needs_port(tmp_path: Path) -> None:
    err = error_of(write(tmp_path, "p.toml", MINIMAL + "port = 4000\n"))
    assert err.field == "server.port" and err.line == 4 and "30001" in str(err)
    err = error_of(write(tmp_path, "c.toml", 'name = "c"\n[server]\nargv = ["./run"]\nkind = "custom"\n'))
    assert err.field == "server.port"


def test_invalid_values(tmp_path: Path) -> None:
    err = error_of(write(tmp_path, "k.toml", MINIMAL + 'kind = "trtllm"\n'))
    assert err.field == "server.kind" and "trtllm" in str(err)
    err = error_of(write(tmp_path, "r.toml", MINIMAL + '[patterns]\nverify = "Target verify ([0-9.]+) ms"\n'))
    assert err.field == "patterns" and "(?P<value>" in str(err)
    err = error_of(write(tmp_path, "w.toml", MINIMAL + '[workers]\nmatch = "sglang::("\n'))
    assert err.field == "workers.match" and err.line == 5
    err = error_of(write(tmp_path, "n.toml", MINIMAL.replace('"p"', '"a/b"')))
    assert err.field == "name" and err.line == 1


def test_load_profile_text(tmp_path: Path) -> None:
    p = load_profile_text(MINIMAL, tmp_path / "x.toml")
    assert p.name == "p"
    with pytest.raises(ProfileError, match=r"x\.toml:2: nope"):
        load_profile_text('name = "p"\nnope = 1\n', tmp_path / "x.toml")


def test_split_argv() -> None:
    prefix, flags = split_argv(["vllm", "serve", "m", "--tp", "8", "--x=1", "--flag", "--bs", "1", "2"])
    assert prefix == ["vllm", "serve", "m"]
    assert flags == [("--tp", ["8"]), ("--x", ["1"]), ("--flag", []), ("--bs", ["1", "2"])]


def test_diff_examples_story() -> None:
    a = load_profile(EXAMPLES / "eagle3-2step-nccl.toml")
    b = load_profile(EXAMPLES / "eagle3-3step.toml")
    knobs = diff_profiles(a, b)
    got = {(k.kind, k.name, k.value_a, k.value_b) for k in knobs}
    assert got == {
        ("flag", "--speculative-num-steps", "2", "3"),
        ("flag", "--speculative-eagle-topk", "1", "4"),
        ("flag", "--speculative-num-draft-tokens", "3", "6"),
        ("env", "NCCL_PROTO", "LL", None),
        ("env", "NCCL_ALGO", "Ring", None),
        ("env", "NCCL_P2P_LEVEL", "SYS", None),
    }
    assert [k.kind for k in knobs] == ["flag", "flag", "flag", "env", "env", "env"]
    assert {k.name for k in diff_profiles(a, b, include_plumbing=True)} >= {"--port"}
    # applying every knob of B to A gives B's experiment
    assert a.with_knobs(knobs).fingerprint() == b.fingerprint()
    assert a.with_knobs(knobs[:1]).server.argv.count("--speculative-num-steps") == 1


def test_diff_switch_flags_and_command(tmp_path: Path) -> None:
    a = load_profile_text(MINIMAL + 'env = {X = "1"}\n', tmp_path / "a.toml")
    b = load_profile_text(
        MINIMAL.replace("sglang.launch_server", "specdebug.sim") + '  # c\n[server.env]\nX = "1"\n',
        tmp_path / "b.toml",
    )
    b2 = b.model_copy(
        update={"server": b.server.model_copy(update={"argv": [*b.server.argv, "--enable-metrics"]})}
    )
    knobs = diff_profiles(a, b2)
    assert [(k.kind, k.name) for k in knobs] == [("command", "(command)"), ("flag", "--enable-metrics")]
    assert knobs[1].value_a is None and knobs[1].switch_b and knobs[1].value_b == "(set)"
    assert a.with_knobs(knobs).server.argv == b2.server.argv


def test_fingerprint_stable_and_sensitive(tmp_path: Path) -> None:
    a = load_profile_text(MINIMAL, tmp_path / "a.toml")
    same = load_profile_text(MINIMAL.replace('"p"', '"q"'), tmp_path / "q.toml")
    other_port = load_profile_text(MINIMAL.replace("30001", "30002"), tmp_path / "r.toml")
    env = load_profile_text(MINIMAL + 'env = {A = "1"}\n', tmp_path / "e.toml")
    assert a.fingerprint() == same.fingerprint() == other_port.fingerprint()
    assert len(a.fingerprint()) == 12
    assert a.fingerprint() != env.fingerprint()
    reordered = load_profile_text(MINIMAL.replace('"p"', '"q"'), tmp_path / "o.toml")
    argv = reordered.server.argv
    cut = next(i for i, a in enumerate(argv) if a.startswith("--"))
    flags = split_argv(argv)[1]
    shuffled = [*argv[:cut], *[t for name, vals in reversed(flags) for t in (name, *vals)]]
    reordered.server.argv = shuffled
    assert reordered.fingerprint() == a.fingerprint()  # flag order is not a knob
    vllm = a.model_copy(update={"server": a.server.model_copy(update={"kind": "vllm"})})
    assert vllm.fingerprint() != a.fingerprint()  # the engine kind is


def test_schema_is_json() -> None:
    schema = profile_schema()
    text = json.dumps(schema)
    assert "argv" in text and "extends" in schema["properties"]
    assert schema["required"] == ["server"]
    assert "source" not in schema["properties"]


def test_find_key_line_variants() -> None:
    text = 'a = 1\n[server]\nargv = [\n  "x",\n]\n"log_file" = "y"\n[server.env]\nK = "v"\n[ready]\nserver.x = 1\n'
    assert find_key_line(text, ("server", "argv")) == 3
    assert find_key_line(text, ("server", "log_file")) == 6
    assert find_key_line(text, ("server", "env", "K")) == 8
    assert find_key_line(text, ("server", "missing")) == 2
    assert find_key_line(text, ("ready", "server", "x")) == 10


def test_profile_model_roundtrip() -> None:
    p = Profile.model_validate({"name": "x", "server": {"argv": ["a"], "port": 1}})
    assert Profile.model_validate(p.model_dump()).fingerprint() == p.fingerprint()


def test_unknown_key_is_reported_before_the_missing_key_it_causes(tmp_path: Path) -> None:
    path = tmp_path / "typo.toml"
    path.write_text('name = "x"\n[server]\nargz = ["python3"]\n')
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    assert "typo.toml:3" in str(info.value) and "unknown key 'argz'" in str(info.value)
