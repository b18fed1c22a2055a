"""Pure parts of the Slurm transport: host specs, scontrol records, the launch step's report."""

from __future__ import annotations

import pytest

from specdebug.remote.api import HostSpecError
from specdebug.remote.factory import address_note
from specdebug.transport.local import is_loopback
from specdebug.transport.slurm.job import SlurmSpec, parse_record, srun_argv
from specdebug.transport.slurm.steps import parse_step_output


def test_specs_name_a_job_and_maybe_a_node() -> None:
    assert SlurmSpec.parse("slurm:123") == SlurmSpec("slurm:123", "123", None)
    assert SlurmSpec.parse("slurm:7:gpu-a01.x") == SlurmSpec("slurm:7:gpu-a01.x", "7", "gpu-a01.x")
    assert SlurmSpec.parse("slurm:7").on("n2").text == "slurm:7:n2"
    assert address_note("slurm:7:n2") == ""


@pytest.mark.parametrize(
    "bad", ["slurm:", "slurm:abc", "slurm:1:", "slurm:1:-rf", "slurm:1:a b", "slurm:1:n;x"]
)
def test_a_bad_spec_is_one_clear_error(bad: str) -> None:
    with pytest.raises(HostSpecError, match="slurm:JOBID"):
        SlurmSpec.parse(bad)


def test_srun_argv_is_an_overlap_step_on_one_node() -> None:
    argv = srun_argv("12", "n1", ["python3", "-c", "x; y"], name="specdebug-helper")
    assert argv[:4] == ["srun", "--jobid=12", "--overlap", "--nodelist=n1"]
    assert "--ntasks=1" in argv and "--job-name=specdebug-helper" in argv
    assert argv[-3:] == ["python3", "-c", "x; y"]  # the command stays argv words, never shell text


def test_scontrol_records_and_addresses() -> None:
    rec = parse_record("JobId=5 JobName=a JobState=RUNNING NodeList=n[1-2] BatchHost=n1")
    assert (rec["JobState"], rec["NodeList"]) == ("RUNNING", "n[1-2]")
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("10.0.0.5") and not is_loopback("gpu7") and not is_loopback(None)


def test_the_launch_steps_report() -> None:
    rc, step, lines, failure = parse_step_output(
        "size 0\nlog /x.log\nserver 42 (py) S 1 42 42\nstep 5.3\nrc 0\n"
    )
    assert (rc, step, failure) == (0, "5.3", None)
    assert lines.splitlines() == ["size 0", "log /x.log", "server 42 (py) S 1 42 42"]
    rc, step, _, failure = parse_step_output(
        "srun: error: Unable to create step for job 5: Invalid\nsrun-exit 1\n"
    )
    assert rc is None and step is None and failure is not None and "Unable to create step" in failure
    assert parse_step_output("size 0\n")[:2] == (None, None)  # not done yet: keep waiting
