"""kill -9 a process that is appending results: every result it reported as written is readable."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from specdebug.core.journal import Journal
from specdebug.core.records import OtherRecord
from specdebug.core.report import history

WRITER = textwrap.dedent(
    """
    import sys
    from specdebug.core.bench.models import BenchResult
    from specdebug.core.journal import Journal
    from specdebug.core.records import BenchResultRecord
    j = Journal(sys.argv[1])
    i = 0
    while True:
        r = BenchResult(profile=f"p{i}", output_tok_s=float(i), unparsed_lines=["x" * 200] * 500)  # ~100 kB
        j.append(BenchResultRecord(result=r), sync=True)
        print(i, flush=True)
        i += 1
    """
)


def test_sigkill_mid_run_keeps_reported_results(tmp_path: Path) -> None:
    session = tmp_path / "s"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(session)], stdout=subprocess.PIPE, text=True)
    reported = -1
    assert proc.stdout is not None
    for line in proc.stdout:
        reported = int(line)
        if reported >= 5:
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    entries = history(Journal(session).records())
    names = [e.result.profile for e in entries]
    assert names[: reported + 1] == [f"p{i}" for i in range(reported + 1)]
    # the session stays usable: a later writer appends after whatever the kill left
    Journal(session).append(OtherRecord(kind="note", text="after the kill"))
    assert Journal(session).events()[-1]["text"] == "after the kill"
