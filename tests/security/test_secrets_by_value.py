"""Secrets by value, not only by name.

Unit: the shape rules (URL credentials, bearer/basic values, secret name=value pairs in free text)
and the by-value Scrubber, with hypothesis where the input is open-ended.
Integration over the real sshd: the sim launched with `--api-key`, DATABASE_URL with a password,
AUTHORIZATION=Bearer and HF_TOKEN in its env; no raw secret appears in grep (text, JSON),
scan --events, env (text, JSON), status, launch --wait (ready and failed, with an excerpt),
bench, history, report, the journal files or the server state file on the box.
"""

from __future__ import annotations

import base64
import json
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specdebug.core.secrets import (
    Scrubber,
    find_secrets,
    is_masked,
    is_secret_name,
    mask_argv,
    mask_env,
    mask_text,
    secret_values,
)
from tests.security.boxkit import forget_server, run, state_dir, unique, write_profile
from tests.sshd_harness import free_port

# -- unit ------------------------------------------------------------------------------------------

SECRET = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-", min_size=8, max_size=40
)
# not a number and not a placeholder word (None, undefined, ...): those are not masked on purpose
SECRET = SECRET.filter(
    lambda s: not s.lstrip("-").isdigit() and not s.startswith("-") and s.lower() not in ("undefined", "none")
)
FILLER = st.text(max_size=40)
CONTEXTS = [
    "server_args=ServerArgs(model_path='m', api_key='{s}', port=30000)",
    "api_key={s}",
    "HF_TOKEN={s}",
    "--api-key {s}",
    "--api-key={s}",
    '{{"api_key": "{s}", "n": 1}}',
    "{{'client_secret': '{s}'}}",
    "DATABASE_URL=postgres://admin:{s}@db/x",
    "redis://:{s}@cache:6379/0",
    "Authorization: Bearer {s}",
    "AUTHORIZATION=Bearer {s}",
    "curl -H 'authorization: token {s}'",
    "MY_SESSION_COOKIE={s}",
    "private_key={s}",
]


@given(FILLER, SECRET, FILLER, st.sampled_from(CONTEXTS))
def test_shape_rules_mask_secrets_in_any_text(before: str, secret: str, after: str, context: str) -> None:
    text = f"{before} {context.format(s=secret)} {after}"
    assert secret not in Scrubber()(text)  # the shape finds it; by value, it goes wherever else it is
    shown = mask_text(text)  # the shape rules alone
    assert context.format(s=secret) not in shown
    assert mask_text(shown) == shown  # idempotent: masked values are left alone


@given(FILLER, SECRET, FILLER)
def test_scrubber_masks_known_values_anywhere(before: str, secret: str, after: str) -> None:
    scrub = Scrubber([secret])
    assert secret not in scrub(f"{before}{secret}{after}{secret}")


@given(SECRET, FILLER)
def test_scrubber_learns_from_a_shape_match(secret: str, later: str) -> None:
    scrub = Scrubber()
    assert secret not in scrub(f"server_args=ServerArgs(api_key='{secret}')")
    assert secret not in scrub(f"{later} the client sent {secret} again")  # alone: by value


@given(st.text(max_size=200))
def test_mask_text_is_idempotent(text: str) -> None:
    once = mask_text(text)
    assert mask_text(once) == once


def test_basic_credentials_only_when_they_decode_to_user_pass() -> None:
    cred = base64.b64encode(b"admin:hunter22").decode()
    assert cred not in mask_text(f"Authorization: Basic {cred}")
    assert cred not in mask_text(f"sent Basic {cred} to the proxy")
    assert (
        mask_text("Basic setup done; Basic information follows")
        == "Basic setup done; Basic information follows"
    )


def test_names_by_word() -> None:
    for name in ("AUTHORIZATION", "OAUTH_CLIENT", "GOOGLE_CREDENTIALS", "PGPASSWORD", "PRIVATE_KEY_PATH",
                 "SESSION_ID", "MY_COOKIE", "HF_TOKEN", "api-key"):  # fmt: skip
        assert is_secret_name(name), name
    for name in ("GIT_AUTHOR_NAME", "NCCL_PASSTHROUGH", "max-total-tokens", "tokenizer-path", "NCCL_PROTO"):
        assert not is_secret_name(name), name


def test_env_and_argv_mask_credentials_inside_values() -> None:
    env = mask_env(
        {
            "DATABASE_URL": "postgres://admin:PASSWORD1@db/x",
            "AUTHORIZATION": "Bearer abcdefgh123",
            "NCCL_PROTO": "Simple",
        }
    )
    assert env["DATABASE_URL"].startswith("postgres://admin:<masked #") and env["DATABASE_URL"].endswith(
        "@db/x"
    )
    assert is_masked(env["AUTHORIZATION"]) and env["NCCL_PROTO"] == "Simple"
    argv = mask_argv(["serve", "--db", "mysql://u:PASSWORD1@h/d", "--api-key", "sk-123456", "--tp", "2"])
    assert "PASSWORD1" not in " ".join(argv) and "sk-123456" not in argv and argv[-2:] == ["--tp", "2"]
    values = secret_values(
        {"DATABASE_URL": "postgres://admin:PASSWORD1@db/x", "AUTHORIZATION": "Bearer tok12345"}
    )
    assert {"PASSWORD1", "Bearer tok12345"} <= values


def test_profile_values_are_masked_wherever_they_appear() -> None:
    from specdebug.core.profiles import Profile
    from specdebug.core.secrets import profile_secrets

    profile = Profile.model_validate(
        {
            "name": "p",
            "server": {
                "argv": ["serve", "--api-key", "sk-abcdef12", "--db", "pg://u:Pw123456@h/x"],
                "env": {"HF_TOKEN": "hf_abcdef12", "DATABASE_URL": "pg://u:Pw123456@h/x"},
            },
        }
    )
    known = profile_secrets(profile)
    assert {"sk-abcdef12", "hf_abcdef12", "Pw123456"} <= known
    # a positional copy of a known secret (`serve.py $HF_TOKEN`) is masked too
    shown = " ".join(mask_argv(["serve.py", "hf_abcdef12", "--port", "1"], known))
    assert "hf_abcdef12" not in shown and shown.endswith("--port 1")
    assert "Pw123456" not in str(mask_env({"NOTE": "pw is Pw123456"}, known))
    assert "hf_abcdef12" not in Scrubber.for_profile(profile)("hub said hf_abcdef12")


def test_no_false_positives_on_server_lines() -> None:
    lines = [
        "[2025-06-01 10:00:01 TP0] Decode batch. #running-req: 1, #token: 100, token usage: 0.01, "
        "accept len: 2.50, gen throughput (token/s): 95.00, #queue-req: 0,",
        "server_args=ServerArgs(model_path='m', max_total_tokens=8192, tokenizer_path='m', "
        "speculative_num_draft_tokens=4, api_key=None, skip_tokenizer_init=False)",
        'INFO:     127.0.0.1:5000 - "POST /v1/completions HTTP/1.1" 200 OK',
        "NCCL INFO NCCL_PROTO set by environment to Simple",
        "http://127.0.0.1:30000/health",
    ]
    for line in lines:
        assert mask_text(line) == line
        assert find_secrets(line) == set()


# -- integration over the real sshd -----------------------------------------------------------------

TAG = uuid.uuid4().hex[:10]
API_KEY = f"sk-live-{TAG}"
DB_PASS = f"Pw{TAG}x"
BEARER = f"eyJ{TAG}bearer"
HF = f"hf_{TAG}tok"
SECRETS = (API_KEY, DB_PASS, BEARER, HF)
ENV = {
    "DATABASE_URL": f"postgres://admin:{DB_PASS}@db/x",
    "AUTHORIZATION": f"Bearer {BEARER}",
    "HF_TOKEN": HF,
    "NCCL_PROTO": "Simple",
}
CRASHER = (
    "import sys\n"
    "print(\"[2025-06-01 10:00:00] server_args=ServerArgs(model_path='m', api_key='%s')\" % sys.argv[1], flush=True)\n"
    "print('[2025-06-01 10:00:01 TP0] Load weight begin.', flush=True)\n"
    "print('[2025-06-01 10:00:02 TP0] Scheduler hit an exception: Traceback (most recent call last):', flush=True)\n"
    "print('  File \"x.py\", line 1, in <module>: key %s, db %s' % (sys.argv[1], sys.argv[2]), flush=True)\n"
    "print('RuntimeError: auth failed for %s at postgres://admin:%s@db/x' % (sys.argv[3], sys.argv[2]), flush=True)\n"
    "sys.exit(1)\n"
)


def assert_no_secret(data: bytes | str, what: str) -> None:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    for secret in SECRETS:
        assert secret not in text, f"{what}: {secret} leaked in {text[:600]!r}"


@pytest.mark.slow
def test_no_secret_reaches_any_output_or_file(sshd, tmp_path: Path) -> None:
    name = unique("secret-sim")
    log = tmp_path / "server.log"
    profile = write_profile(
        tmp_path / "p.toml",
        name,
        {
            "argv": [
                sys.executable,
                "-m",
                "specdebug.sim",
                "--tp",
                "2",
                "--port",
                str(free_port()),
                "--time-scale",
                "0.02",
                "--log-file",
                str(tmp_path / "sim.log"),
                "--api-key",
                API_KEY,
            ],
            "env": ENV,
            "log_file": str(log),
        },  # fmt: skip
        ready={"timeout_s": 90},
        bench={"requests": 2, "output_len": 16, "input_len": 8},
    )
    session = tmp_path / "session"
    crash = unique("secret-crash")
    crash_profile = write_profile(
        tmp_path / "crash.toml",
        crash,
        {
            "argv": [sys.executable, "-c", CRASHER, API_KEY, DB_PASS, BEARER, "--api-key", API_KEY],
            "env": ENV,
            "port": free_port(),
            "log_file": str(tmp_path / "crash.log"),
        },
        ready={"timeout_s": 60},
    )
    seen: dict[str, bytes] = {}

    def check(what: str, res, codes=(0,)) -> bytes:
        assert res.returncode in codes, (what, res.returncode, res.stderr.decode(errors="replace")[-2000:])
        assert_no_secret(res.stdout, what)
        assert_no_secret(res.stderr, f"{what} (stderr)")
        seen[what] = res.stdout
        return res.stdout

    try:
        check(
            "launch --wait",
            run(sshd, "launch", "gpubox", "-c", str(profile), "--wait", "--session", str(session)),
        )
        assert (
            API_KEY in log.read_text()
        )  # the server did print it (server_args): there was something to hide
        with log.open("a") as f:  # the secrets alone, where only their values can give them away
            f.write(f"[2025-06-01 11:00:00 TP0] client retried with {API_KEY}\n")
            f.write(f"[2025-06-01 11:00:01 TP0] db login {DB_PASS} refused; header {BEARER}; hub {HF}\n")
            f.write(f"[2025-06-01 11:00:02 TP0] connecting to postgres://admin:{DB_PASS}@db/x\n")
        where = f"gpubox:{log}"
        # the read-only verbs are independent of each other: run side by side (each its own process)
        reads = {
            "grep -c": (
                ["grep", where, "-c", str(profile), "-e", "retried|refused|connecting|api_key"],
                (0,),
            ),
            "grep -c --json": (
                ["grep", where, "-c", str(profile), "-e", "retried|refused|api_key", "--json"],
                (0,),
            ),
            "grep": (["grep", where, "-e", "retried|connecting|api_key"], None),
            "scan --events": (["scan", where, "-c", str(profile), "--events"], (0,)),
            "scan --events --json": (["scan", where, "-c", str(profile), "--events", "--json"], (0,)),
            "env": (["env", "gpubox", "-c", str(profile)], (0, 1)),
            "env --json": (["env", "gpubox", "-c", str(profile), "--json"], (0, 1)),
            "status": (["status", "gpubox", "-c", str(profile)], (0,)),
            "status --json": (["status", "gpubox", "-c", str(profile), "--json"], (0,)),
        }
        with ThreadPoolExecutor(len(reads)) as pool:
            done = {what: pool.submit(run, sshd, *argv) for what, (argv, _) in reads.items()}
        outs = {what: check(what, done[what].result(), codes) for what, (_, codes) in reads.items() if codes}
        assert outs["grep -c"].count(b"<masked #") >= 5
        # without the profile: the key is learned from the server_args line, URLs by their shape
        res = done["grep"].result()
        assert (
            res.returncode == 0 and API_KEY.encode() not in res.stdout and DB_PASS.encode() not in res.stdout
        )
        env_json = outs["env --json"]
        assert b"DATABASE_URL" in env_json and b"postgres://admin:<masked #" in env_json
        check("bench", run(sshd, "bench", "gpubox", "-c", str(profile), "--session", str(session), "--json"))
        check(
            "launch --wait (failed)",
            # beside the first server (GPUs it may hold: refused without --force)
            run(
                sshd,
                "launch",
                "gpubox",
                "-c",
                str(crash_profile),
                "--wait",
                "--force",
                "--session",
                str(session),
            ),
            codes=(1,),
        )
        failed = check(
            "launch --wait --json (failed)",
            run(
                sshd,
                "launch",
                "gpubox",
                "-c",
                str(crash_profile),
                "--wait",
                "--force",
                "--json",
                "--session",
                str(session),
            ),
            codes=(1,),
        )
        assert json.loads(failed)["excerpt"]  # the excerpt was shown, masked
        check("history", run(sshd, "history", "--session", str(session)))
        check("history --json", run(sshd, "history", "--session", str(session), "--json"))
        check("report", run(sshd, "report", "--session", str(session)))
        for path in session.iterdir():
            assert_no_secret(path.read_bytes(), f"journal file {path.name}")
        for record in (state_dir() / f"{name}.json", state_dir() / f"{crash}.json"):
            assert_no_secret(record.read_bytes(), f"state file {record.name}")
        check("stop", run(sshd, "stop", "gpubox", "-c", str(profile)))
    finally:
        forget_server(name)
        forget_server(crash)
