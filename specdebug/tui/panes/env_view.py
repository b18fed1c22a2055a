"""How the Env pane draws a worker's environment: one matrix cell per variable and process, the
legend that says what every mark means, a worker's short title, and the report's warnings in TUI
words.  Every value comes from the box: plain `Text` with a style, never markup."""

from __future__ import annotations

from rich.text import Text

from specdebug.core.env.matrix import short_title as core_short_title
from specdebug.core.env.model import EnvReport, ProcEnv
from specdebug.core.sanitize import visible

STATUS_STYLE = {
    "ok": "green",
    "missing": "bold red",
    "different": "bold yellow",
    "unverifiable": "magenta",
}
ENVIRON_STYLE = {"readable": "green", "clobbered": "bold yellow", "denied": "bold red", "gone": "dim"}
LEGEND = (  # every mark is a word or a sign, colour only repeats it (a monochrome terminal reads it too)
    ("✓ ok", "green"),
    ("missing", "bold red"),
    ("≠ different", "bold yellow"),
    ("? unverifiable (~launcher's value)", "magenta"),
    ("[nccl] proven by NCCL log", "dim"),
    ("! set by the server itself", "bold red"),
)
MAX_VALUE = 40


def clip(value: str, limit: int = MAX_VALUE) -> str:
    """A value from the box for one cell: controls shown as escapes (never sent), then clipped."""
    value = visible(value, tab=" ")
    return value if len(value) <= limit else value[: limit - 1] + "…"


def short_title(proc: ProcEnv) -> str:
    """`sglang::scheduler_TP0` -> `TP0` (core.env.matrix's label), controls shown as escapes."""
    return clip(core_short_title(proc), 18)


def var_cell(proc: ProcEnv, name: str) -> Text:
    """One matrix cell: the checked status/value of an expected var, or an extra's plain value."""
    vc = proc.vars.get(name)
    if vc is not None:
        style = STATUS_STYLE[vc.status]
        if vc.status == "ok":
            text = Text(clip(vc.actual or ""), style=style)
            text.append(" ✓", style=style)
        elif vc.status == "missing":
            text = Text("missing", style=style)
        elif vc.status == "different":
            text = Text(clip(vc.actual or ""), style=style)
            text.append(" ≠", style=style)
        else:
            text = Text("?", style=style)
            if vc.actual is not None:  # the launcher's value: inference, not proof
                text.append(f" ~{clip(vc.actual, 20)}", style="dim")
        if vc.source == "nccl_log":
            text.append(" [nccl]", style="dim")
        if vc.overwritten_by_server and vc.status != "ok":
            text.append(" !", style="bold red")
        return text
    if name in proc.extra:
        return Text(clip(proc.extra[name]))
    if proc.environ_state != "readable":
        return Text("?", style="dim")
    return Text("-", style="dim")


NO_EXPECTED_HINT = (
    "no expected variables: the profile sets no [server] env (P picks another profile); "
    "showing what the workers have"
)


def tui_warnings(report: EnvReport) -> list[str]:
    """The report's warnings in TUI words: the core's hint names command-line flags (-c,
    --expect) that a TUI user cannot type, so it is replaced by what to do here."""
    out = []
    for line in report.summary.warnings:
        if not report.expected and line.startswith("no expected variables"):
            line = (
                NO_EXPECTED_HINT
                if report.expected_source.startswith("profile")
                else (
                    "no expected variables: pick a profile with P (its [server] env is what the workers "
                    "should have); showing what the workers have"
                )
            )
        out.append(line)
    return out
