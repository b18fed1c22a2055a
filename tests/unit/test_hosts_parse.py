import pytest

from specdebug.core.hosts import decode_throttle, parse_nvidia_smi
from specdebug.remote.shell import watchdog_argv
from specdebug.transport.ssh.hostspec import HostSpec, HostSpecError
from specdebug.transport.ssh.quote import sh_join


def test_parse_rows_with_na_and_short_rows():
    text = (
        "0, NVIDIA H200, GPU-a, 97, 131072, 143771, 61, 612.45, 1980, 1980, 0x0000000000000000\n"
        "1, NVIDIA A100-SXM4-80GB, GPU-b, [N/A], 10, 81920, 40, [Not Supported], 1410, 1410, 0x0000000000000004\n"
        "2, Tesla V100, GPU-c, 5, 100, 16384, 35\n"  # old driver: fewer fields
    )
    gpus = parse_nvidia_smi(text)
    assert [g.index for g in gpus] == [0, 1, 2]
    assert gpus[1].utilization_pct is None and gpus[1].power_draw_w is None
    assert gpus[1].throttle_reasons == ["sw_power_cap"] and gpus[1].throttled
    assert gpus[2].clocks_sm_mhz is None and gpus[2].throttle_reasons == []
    assert not gpus[0].throttled


def test_decode_throttle_idle_is_not_a_performance_throttle():
    assert decode_throttle("0x0000000000000001") == ["gpu_idle"]
    assert decode_throttle("[Not Supported]") == []


@pytest.mark.parametrize(
    "text,host,user,port",
    [
        ("gpubox", "gpubox", None, None),
        ("me@10.1.230.174", "10.1.230.174", "me", None),
        ("me@box:2222", "box", "me", 2222),
        ("[::1]:22", "::1", None, 22),
    ],
)
def test_host_spec_forms(text, host, user, port):
    spec = HostSpec.parse(text)
    assert (spec.host, spec.user, spec.port) == (host, user, port)


def test_bad_host_spec_and_missing_config():
    with pytest.raises(HostSpecError):
        HostSpec.parse("a b")
    with pytest.raises(HostSpecError, match="ssh config file not found"):
        HostSpec.parse("box", "/nonexistent/ssh_config")


def test_watchdog_keeps_argv_as_positional_words():
    cmd = sh_join(watchdog_argv(["echo", "$(id)", "a;b"]))
    assert "'$(id)'" in cmd and "'a;b'" in cmd
    assert sh_join(["x", "it's"]) == "x 'it'\"'\"'s'"


def test_stream_cwd_expands_tilde_like_the_launcher(tmp_path, monkeypatch):
    import subprocess

    from specdebug.remote.shell import with_env_cwd

    (tmp_path / "work dir").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path))
    for cwd, want in [("~", tmp_path), ("~/work dir", tmp_path / "work dir"), (str(tmp_path), tmp_path)]:
        out = subprocess.run(with_env_cwd(["pwd"], {"X": "1"}, cwd), capture_output=True, text=True)
        assert out.stdout.strip() == str(want), out.stderr


def test_memory_above_the_total_is_flagged_by_probe() -> None:
    """The Hosts pane showed 247.1/140.4 GiB as if it were a reading to trust (issue 26)."""
    from specdebug.core.hosts import GpuInfo, HostInfo
    from specdebug.verbs.probe import _print_text

    over = GpuInfo(index=0, name="NVIDIA H200", memory_used_mib=253030, memory_total_mib=143771)
    fine = GpuInfo(index=1, name="NVIDIA H200", memory_used_mib=126555, memory_total_mib=143771)
    assert over.memory_over_total and not fine.memory_over_total
    assert not GpuInfo(index=2).memory_over_total  # unknown is not "over"
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        _print_text(HostInfo(host="b", connected=True, hostname="b", gpus=[over, fine]))
    lines = buf.getvalue().splitlines()
    assert "MEMORY ABOVE TOTAL" in lines[1] and "MEMORY ABOVE TOTAL" not in lines[2]
