"""`specdebug profile check|schema|diff`: validate profiles, print the schema, list differing knobs.

No host needed: these read local files only.  `check A B ...` checks every file and prints every
problem of each (not only the first).  Exit codes: 0 ok (diff: also when profiles differ), 2 when
a profile cannot be loaded.
"""

from __future__ import annotations

import argparse
import json
import sys

from specdebug.core.profiles import Profile, ProfileError, diff_profiles, load_profile, profile_schema
from specdebug.resources import profile_path
from specdebug.verbs.common import out, print_json


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("profile")
    sub = parser.add_subparsers(dest="profile_cmd", metavar="CMD", required=True)

    check = sub.add_parser("check", help="validate profiles; one file: print it resolved (after extends)")
    check.add_argument("files", nargs="+", metavar="FILE", help="profile TOML file(s)")
    check.add_argument(
        "--json",
        action="store_true",
        help="one file: the resolved profile as JSON; several: one JSON line per file",
    )
    check.set_defaults(func=cmd_check)

    schema = sub.add_parser("schema", help="print the JSON schema of the profile format")
    schema.set_defaults(func=cmd_schema)

    diff = sub.add_parser("diff", help="list the knobs (CLI flags, env vars) two profiles differ in")
    diff.add_argument("a", help="first profile TOML")
    diff.add_argument("b", help="second profile TOML")
    diff.add_argument("--all", action="store_true", help="include --port/--host/--log-file")
    diff.add_argument("--json", action="store_true", help="print one JSON object")
    diff.set_defaults(func=cmd_diff)


def _load(path: str) -> Profile | None:
    from specdebug.core.control.launch import launch_refusal  # here: `profile schema` stays light

    try:
        profile = load_profile(profile_path(path))
    except ProfileError as exc:
        for problem in exc.problems:
            out(f"error: {problem}", file=sys.stderr)
        return None
    why = launch_refusal(profile)
    if why is not None:  # valid as a file, but launch would refuse it: so does check
        out(f"error: {why}", file=sys.stderr)
        return None
    return profile


def _check_many(paths: list[str], *, as_json: bool) -> int:
    """Check every file (a bad one does not stop the others); exit 2 when any has a problem."""
    from specdebug.core.control.launch import launch_refusal  # here: `profile schema` stays light

    bad = 0
    for path in paths:
        try:
            profile = load_profile(profile_path(path))
        except ProfileError as exc:
            bad += 1
            if as_json:
                problems = [{"line": p.line, "field": p.field, "message": p.detail} for p in exc.problems]
                print_json({"file": path, "ok": False, "problems": problems})
            else:
                out(f"{path}: {len(exc.problems)} problem(s)")
                for problem in exc.problems:
                    out(f"  error: {problem}")
            continue
        why = launch_refusal(profile)
        if why is not None:  # valid as a file, but launch would refuse it
            bad += 1
            if as_json:
                print_json(
                    {"file": path, "ok": False, "problems": [{"line": None, "field": None, "message": why}]}
                )
            else:
                out(f"{path}: 1 problem(s)")
                out(f"  error: {why}")
            continue
        if as_json:
            out(
                json.dumps(
                    {"file": path, "ok": True, "name": profile.name, "fingerprint": profile.fingerprint()}
                )
            )
        else:
            out(f"{path}: ok ({profile.name}, fingerprint {profile.fingerprint()})")
    if not as_json:
        out(f"{len(paths) - bad} of {len(paths)} profiles ok")
    return 2 if bad else 0


def cmd_check(args: argparse.Namespace) -> int:
    if len(args.files) > 1:
        return _check_many(args.files, as_json=args.json)
    profile = _load(args.files[0])
    if profile is None:
        return 2
    data = profile.model_dump(mode="json")
    if args.json:
        data["fingerprint"] = profile.fingerprint()
        data["extends_chain"] = [str(p) for p in profile.extends_chain]
        out(json.dumps(data, indent=2))
        return 0
    out(f"# {profile.source}: ok (fingerprint {profile.fingerprint()})")
    for base in profile.extends_chain:
        out(f"# extends {base}")
    out(_to_toml(data))
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    out(json.dumps(profile_schema(), indent=2))
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    a, b = _load(args.a), _load(args.b)
    if a is None or b is None:
        return 2
    knobs = diff_profiles(a, b, include_plumbing=args.all)
    if args.json:
        out(
            json.dumps(
                {
                    "a": {"name": a.name, "file": str(a.source), "fingerprint": a.fingerprint()},
                    "b": {"name": b.name, "file": str(b.source), "fingerprint": b.fingerprint()},
                    "knobs": [k.model_dump(mode="json") for k in knobs],
                },
                indent=2,
            )
        )
        return 0
    if not knobs:
        out(f"{a.name} and {b.name}: no differing knobs")
        return 0
    width = max(len(k.name) for k in knobs)
    out(f"{'knob':<{width}}  kind     {a.name}  ->  {b.name}")
    for k in knobs:
        out(f"{k.name:<{width}}  {k.kind:<7}  {_show(k.value_a)}  ->  {_show(k.value_b)}")
    return 0


def _show(value: str | None) -> str:
    return "(absent)" if value is None else value


def _to_toml(data: dict[str, object]) -> str:
    """A small TOML writer for the resolved profile (values are str/int/float/bool/list/dict)."""
    lines: list[str] = []
    scalars = {k: v for k, v in data.items() if not isinstance(v, dict)}
    for key, value in scalars.items():
        if value is not None:
            lines.append(f"{key} = {_toml_value(value)}")
    for key, value in data.items():
        if isinstance(value, dict):
            _toml_table(lines, [key], value)
    return "\n".join(lines)


def _toml_table(lines: list[str], path: list[str], table: dict[str, object]) -> None:
    lines.append("")
    lines.append(f"[{'.'.join(_toml_key(p) for p in path)}]")
    for key, value in table.items():
        if value is not None and not isinstance(value, dict):
            lines.append(f"{_toml_key(key)} = {_toml_value(value)}")
    for key, value in table.items():
        if isinstance(value, dict):
            _toml_table(lines, [*path, key], value)


def _toml_key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() else json.dumps(key)


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(value)
