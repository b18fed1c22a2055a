"""Secret masking: names, values, argv, free text, comparisons by fingerprint."""

from hypothesis import given
from hypothesis import strategies as st

from specdebug.core.secrets import (
    fingerprint,
    is_masked,
    is_secret_name,
    mask,
    mask_argv,
    mask_env,
    mask_value,
    same_value,
    scrub,
    secret_values,
)


def test_secret_names_case_insensitive():
    for name in (
        "HF_TOKEN",
        "hf_token",
        "OPENAI_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
        "DB_PASSWORD",
        "PGPASS",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "apikey",
    ):
        assert is_secret_name(name), name
    for name in (
        "NCCL_PROTO",
        "CUDA_VISIBLE_DEVICES",
        "PATH",
        "HOME",
        "SGLANG_LOG_LEVEL",
        "max-total-tokens",
        "tokenizer-path",
        "SPECULATIVE_NUM_DRAFT_TOKENS",
        "NCCL_PASSTHROUGH",
    ):
        assert not is_secret_name(name), name


def test_mask_env_hides_only_secrets():
    env = {"HF_TOKEN": "hf_supersecret", "NCCL_ALGO": "Ring"}
    out = mask_env(env)
    assert out["NCCL_ALGO"] == "Ring"
    assert "hf_supersecret" not in out["HF_TOKEN"]
    assert is_masked(out["HF_TOKEN"])
    assert mask_env(out) == out  # idempotent


def test_mask_value_none_and_plain():
    assert mask_value("HF_TOKEN", None) is None
    assert mask_value("PATH", "/bin") == "/bin"


def test_fingerprint_compares_without_showing():
    assert mask("abc") == mask("abc")
    assert mask("abc") != mask("abd")
    assert same_value(mask("abc"), "abc")
    assert same_value("abc", mask("abc"))
    assert not same_value(mask("abc"), mask("abd"))
    assert not same_value("x", None)
    assert same_value(None, None)
    assert len(fingerprint("x")) == 8


def test_mask_argv_flags_and_assignments():
    argv = [
        "python",
        "-m",
        "sglang.launch_server",
        "--api-key",
        "sk-live-1",
        "--hf-token=hf_x9",
        "--port",
        "30000",
        "HF_TOKEN=hf_zz",
        "--tp",
        "2",
    ]
    out = mask_argv(argv)
    joined = " ".join(out)
    for secret in ("sk-live-1", "hf_x9", "hf_zz"):
        assert secret not in joined
    assert out[:4] == argv[:4]
    assert out[6:8] == ["--port", "30000"]
    assert out[-2:] == ["--tp", "2"]
    knobs = ["--max-total-tokens", "8192", "--tokenizer-path", "/m/tok", "--speculative-num-draft-tokens=6"]
    assert mask_argv(knobs) == knobs


def test_mask_argv_flag_without_value():
    assert mask_argv(["x", "--api-key", "--port", "1"]) == ["x", "--api-key", "--port", "1"]


def test_scrub_free_text():
    vals = secret_values({"HF_TOKEN": "hf_abcdef", "PASS": "ab", "PATH": "/usr/bin"})
    assert vals == {"hf_abcdef"}
    assert "hf_abcdef" not in scrub("got hf_abcdef twice hf_abcdef", vals)
    assert scrub("nothing here", vals) == "nothing here"


@given(st.text(min_size=1, max_size=40))
def test_mask_never_contains_value(value):
    if len(value) >= 2:
        m = mask(value)
        assert value not in m or value in "<masked #>0123456789abcdef"
