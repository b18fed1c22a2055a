"""The check itself: from a process table, file reads and NCCL log lines to an EnvReport.

Pure (no I/O): every rule about proof, inference and secrets is unit-tested on fixed inputs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from specdebug.core.control.workers import Selection, select_workers, server_kind
from specdebug.core.env.model import (
    CLK_TCK,
    SPT_ADVICE,
    EnvQuery,
    EnvReport,
    EnvSummary,
    Evidence,
    NcclEnvLine,
    ProcEnv,
    VarCheck,
    parse_nccl_env_line,
)
from specdebug.core.env.proc import classify_environ, parse_btime, parse_passwd, parse_status
from specdebug.core.secrets import mask_argv, mask_value, same_value, scrub, secret_values
from specdebug.engines import server_env_rules
from specdebug.engines.envrules import EnvRule
from specdebug.remote.api import FileRead, ProcInfo

# ---------------------------------------------------------------------------------------------
# the check itself (pure: built from a process table, file reads and log lines)


def _values_equal(expected: str, actual: str, *, numeric: bool = False) -> bool:
    if same_value(expected, actual):
        return True
    if numeric:
        try:
            return int(expected.strip()) == int(actual.strip())
        except ValueError:
            return False
    return False


class _Masker:
    """Masks values for output; collects every raw secret seen so free text can be scrubbed."""

    def __init__(self, show: bool) -> None:
        self.show = show
        self.secrets: set[str] = set()

    def learn(self, env: Mapping[str, str]) -> None:
        if not self.show:
            self.secrets |= secret_values(env)

    def value(self, name: str, value: str | None) -> str | None:
        return value if self.show else mask_value(name, value)

    def env(self, env: Mapping[str, str]) -> dict[str, str]:
        return {k: self.value(k, v) or "" for k, v in env.items()}

    def text(self, text: str) -> str:
        return text if self.show else scrub(text, self.secrets)

    def argv(self, argv: Sequence[str]) -> str:
        words = [a for a in argv if a]
        return " ".join(words) if self.show else self.text(" ".join(mask_argv(words)))


def _wanted_extra(name: str, prefixes: Sequence[str]) -> bool:
    return any(name.startswith(p) for p in prefixes)


def _short_title(proc: ProcEnv) -> str:
    return proc.title.split(" ")[0] if proc.title else f"pid {proc.pid}"


def build_report(
    query: EnvQuery,
    procs: Sequence[ProcInfo],
    reads: Mapping[str, FileRead],
    nccl_lines: Sequence[str] = (),
    *,
    selection: Selection | None = None,
    log_error: str | None = None,
) -> EnvReport:
    """Turn a process table, the probe's file reads and NCCL log lines into the report."""
    sel = selection or select_workers(
        procs, pids=query.pids, match=query.match, root_pid=query.root_pid, pgid=query.pgid
    )
    users = parse_passwd(f.data if (f := reads.get("/etc/passwd")) else None)
    btime = parse_btime(f.data if (f := reads.get("/proc/stat")) else None)
    kind = query.server_kind or server_kind(sel.workers)
    argv = query.server_argv
    if argv is None:
        argv = list(sel.launcher.cmdline) if sel.launcher is not None else []
    rules: dict[str, EnvRule] = server_env_rules(kind, query.server_version, argv)
    mask = _Masker(query.show_secrets)
    mask.learn(query.expected)

    def read_proc(info: ProcInfo | None, pid: int) -> tuple[ProcEnv, dict[str, str]]:
        status = parse_status(f.data if (f := reads.get(f"/proc/{pid}/status")) else None)
        state = (status.get("State") or (info.state if info else "") or "").split(" ")[0] or None
        env_state, env, err = classify_environ(reads.get(f"/proc/{pid}/environ"), state)
        cmd_read = reads.get(f"/proc/{pid}/cmdline")
        argv = info.cmdline if info else []
        if cmd_read is not None and cmd_read.data:
            argv = [a.decode("utf-8", "replace") for a in cmd_read.data.split(b"\0")]
        uid = int(status["Uid"].split()[0]) if status.get("Uid") else (info.uid if info else None)
        ppid = int(status["PPid"]) if status.get("PPid", "").isdigit() else (info.ppid if info else None)
        start = btime + info.start_ticks / CLK_TCK if (info is not None and btime is not None) else None
        mask.learn(env)
        proc = ProcEnv(
            pid=pid,
            ppid=ppid,
            pgid=info.pgid if info else None,
            uid=uid,
            user=users.get(uid, str(uid)) if uid is not None else None,
            start_time=start,
            state=state,
            environ_state=env_state,
            environ_error=err,
            env_count=len(env),
        )
        proc.title = "\0".join(argv)  # masked below, once every secret is known
        return proc, env

    launcher_env: dict[str, str] = {}
    launcher: ProcEnv | None = None
    if sel.launcher is not None:
        launcher, launcher_env = read_proc(sel.launcher, sel.launcher.pid)
    workers: list[tuple[ProcEnv, dict[str, str]]] = [read_proc(p, p.pid) for p in sel.workers]
    workers += [read_proc(None, pid) for pid in sel.missing_pids]

    reasons: list[str] = []
    warnings: list[str] = []
    expected = dict(query.expected)
    expected_source = query.expected_source
    if query.expect_from_launcher:
        if launcher is None:
            reasons.append("--expect-from-launcher: no launcher process found above the workers")
        elif launcher.environ_state != "readable":
            reasons.append(
                f"--expect-from-launcher: environ of launcher pid {launcher.pid} is {launcher.environ_state}"
            )
        else:
            from_launcher = {k: v for k, v in launcher_env.items() if _wanted_extra(k, query.prefixes)}
            expected = {**from_launcher, **expected}
            expected_source = f"launcher pid {launcher.pid}" + (" + --expect" if query.expected else "")

    # NCCL proof lines, per pid
    nccl: dict[int, dict[str, NcclEnvLine]] = {}
    worker_pids = {w.pid for w, _ in workers}
    evidence: list[Evidence] = []
    for raw in nccl_lines:
        parsed = parse_nccl_env_line(raw)
        if parsed is None:
            continue
        interesting = parsed.pid in worker_pids or (launcher is not None and parsed.pid == launcher.pid)
        if not interesting:
            continue
        nccl.setdefault(parsed.pid, {})[parsed.name] = parsed
        evidence.append(
            Evidence(
                source="nccl_log",
                pid=parsed.pid,
                rank=parsed.rank,
                name=parsed.name,
                value=mask.value(parsed.name, parsed.value) or "",
                line=mask.text(parsed.line),
                is_worker=parsed.pid in worker_pids,
            )
        )

    launcher_env_known = launcher is not None and launcher.environ_state == "readable"

    def check(proc: ProcEnv, env: dict[str, str], name: str, want: str, is_worker: bool) -> VarCheck:
        vc = _check(proc, env, name, want, is_worker)
        rule = rules.get(name)
        if rule is None or not is_worker:
            return vc
        note = rule.note
        if rule.effect != "overwrites" and vc.status == "different" and launcher_env_known:
            # the launcher's environ tells which case this is: not exported, or replaced (older server)
            exported = launcher_env.get(name)
            if exported is None:
                note = (
                    f"{name} was not exported to the server (launcher pid {launcher.pid if launcher else '?'}), so the server set "
                    f"its own {rule.value}: export it in the profile env; {rule.note}"
                )
            elif _values_equal(exported, want):
                note = f"the launcher had {name}={mask.value(name, exported)} but the server replaced it; {rule.note}"
        if (
            rule.overwrites
            or (rule.effect == "maybe" and vc.status in ("different", "unverifiable"))
            or (rule.effect == "default" and vc.status == "different")
        ):
            vc.overwritten_by_server = True
            vc.note = _join(note, vc.note) if vc.note else note
        return vc

    def _check(proc: ProcEnv, env: dict[str, str], name: str, want: str, is_worker: bool) -> VarCheck:
        rule = rules.get(name)
        vc = VarCheck(status="unverifiable", expected=mask.value(name, want))
        proof = nccl.get(proc.pid, {}).get(name)
        if proc.environ_state == "readable":
            actual = env.get(name)
            vc.actual = mask.value(name, actual)
            if actual is None:
                vc.status = "missing"
            else:
                vc.status = "ok" if _values_equal(want, actual) else "different"
            if proof is not None and (actual is None or not _values_equal(proof.value, actual, numeric=True)):
                vc.status = "ok" if _values_equal(want, proof.value, numeric=True) else "different"
                vc.actual, vc.source = mask.value(name, proof.value), "nccl_log"
                vc.note = _join(
                    vc.note,
                    f"environ shows {mask.value(name, actual)!s} at exec; NCCL read "
                    f"{mask.value(name, proof.value)}",
                )
            return vc
        if proof is not None:
            vc.status = "ok" if _values_equal(want, proof.value, numeric=True) else "different"
            vc.actual, vc.source = mask.value(name, proof.value), "nccl_log"
            return vc
        inferable = rule is None or rule.effect == "default"
        if inferable and is_worker and launcher is not None and launcher.environ_state == "readable":
            vc.source = "launcher"
            vc.actual = mask.value(name, launcher_env.get(name))
            inferred = "absent" if name not in launcher_env else "inherited"
            vc.note = _join(vc.note, f"{inferred} from launcher pid {launcher.pid} (inference, not proof)")
        return vc

    for proc, env in workers:
        for name, want in expected.items():
            proc.vars[name] = check(proc, env, name, want, True)
        proc.extra = mask.env(
            {k: v for k, v in sorted(env.items()) if k not in expected and _wanted_extra(k, query.prefixes)}
        )
    if launcher is not None:
        for name, want in expected.items():
            launcher.vars[name] = check(launcher, launcher_env, name, want, False)
        launcher.extra = mask.env(
            {
                k: v
                for k, v in sorted(launcher_env.items())
                if k not in expected and _wanted_extra(k, query.prefixes)
            }
        )

    # titles masked now that every secret value is known
    for proc in [w for w, _ in workers] + ([launcher] if launcher else []):
        proc.title = mask.argv(proc.title.split("\0"))

    # launcher evidence for workers whose own environ is unreadable
    blind = [w for w, _ in workers if w.environ_state != "readable"]
    if blind and launcher is not None and launcher.environ_state == "readable":
        for name in expected:
            rule = rules.get(name)
            # what the server may overwrite is no evidence of what the workers got
            if name in launcher_env and (rule is None or rule.effect == "default"):
                evidence.append(
                    Evidence(
                        source="launcher",
                        pid=launcher.pid,
                        name=name,
                        value=mask.value(name, launcher_env[name]) or "",
                        is_worker=False,
                    )
                )

    # reasons, counts, summary
    counts: dict[str, int] = {s: 0 for s in ("ok", "missing", "different", "unverifiable")}
    states: dict[str, int] = {}
    for proc, _ in workers:
        states[proc.environ_state] = states.get(proc.environ_state, 0) + 1
        for vc in proc.vars.values():
            counts[vc.status] += 1
        label = _short_title(proc)
        # an unreadable environ fails the check only when it leaves a variable without proof
        target = reasons if any(vc.status != "ok" for vc in proc.vars.values()) else warnings
        if proc.environ_state == "clobbered":
            target.append(f"environ of {label} (pid {proc.pid}) is clobbered by setproctitle; {SPT_ADVICE}")
        elif proc.environ_state == "denied":
            target.append(
                f"environ of {label} (pid {proc.pid}, user {proc.user}) is not readable "
                f"({proc.environ_error}): another user's process; check as that user or root"
            )
        elif proc.environ_state == "gone":
            target.append(f"pid {proc.pid} is gone")
    for name in expected:
        for status in ("missing", "different", "unverifiable"):
            hit = [w for w, _ in workers if w.vars[name].status == status]
            if not hit:
                continue
            pids = ", ".join(str(w.pid) for w in hit)
            if status == "different":
                for w in hit:
                    vc = w.vars[name]
                    reasons.append(
                        f"{name} different on pid {w.pid}: expected {vc.expected}, actual {vc.actual}"
                        + (f" ({vc.note})" if vc.overwritten_by_server else "")
                    )
            else:
                reasons.append(f"{name} {status} on {len(hit)}/{len(workers)} workers (pids {pids})")
    if not workers:
        reasons.insert(0, f"no workers found ({sel.how})")
    if not expected:
        warnings.append(
            "no expected variables (use -c PROFILE, --expect K=V or --expect-from-launcher); "
            "showing what the workers have"
        )
    for name in expected:
        rule = rules.get(name)
        if rule is None or rule.effect == "default" or all(w.vars[name].status == "ok" for w, _ in workers):
            continue
        if rule.overwrites:
            warnings.append(f"{name}: {rule.note}; a user value never reaches the workers")
        else:
            warnings.append(f"{name}: {rule.note}")
    if log_error:
        warnings.append(log_error)
    if launcher is not None and launcher.environ_state != "readable" and blind:
        warnings.append(f"launcher pid {launcher.pid} environ is {launcher.environ_state} too")

    ok: bool | None = bool(workers) and not reasons
    exit_code = 0 if ok else 1
    if query.box_wide:  # not the profile's server: what these processes lack is no verdict on it
        ok, reasons = None, []
        exit_code = 0 if workers else 1
        warnings.insert(0, box_wide_note(len(workers), sel.how))
    method = _method(workers, launcher, nccl, query.log_path)
    summary = EnvSummary(
        workers=len(workers),
        ok=ok,
        exit_code=exit_code,
        counts=counts,
        environ_states=states,
        method=method,
        reasons=[mask.text(r) for r in reasons],
        warnings=[mask.text(w) for w in warnings],
        server_kind=kind,
    )
    report = EnvReport(
        selection=mask.text(sel.how),
        box_wide=query.box_wide,
        expected=mask.env(expected),
        expected_source=expected_source,
        prefixes=list(query.prefixes),
        log_path=query.log_path,
        masked=not query.show_secrets,
        workers=[w for w, _ in workers],
        launcher=launcher,
        evidence=evidence,
        summary=summary,
    )
    if query.show_secrets or not mask.secrets:
        return report
    # belt and braces: no raw secret value survives anywhere in the report, whatever field it reached
    return EnvReport.model_validate(_scrub_tree(report.model_dump(), mask))


def box_wide_note(found: int, how: str) -> str:
    """The label of a box-wide look, wherever it is shown."""
    return (
        f"box-wide look: {found} processes ({how}), whoever runs them; not this profile's server, "
        "so no verdict"
    )


def _scrub_tree(obj: object, mask: _Masker) -> object:
    if isinstance(obj, str):
        return mask.text(obj)
    if isinstance(obj, dict):
        return {k: _scrub_tree(v, mask) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_scrub_tree(v, mask) for v in obj]
    return obj


def _join(a: str | None, b: str) -> str:
    return f"{a}; {b}" if a else b


def _method(
    workers: list[tuple[ProcEnv, dict[str, str]]],
    launcher: ProcEnv | None,
    nccl: dict[int, dict[str, NcclEnvLine]],
    log_path: str | None,
) -> str:
    """One line saying how the answer was obtained."""
    n = len(workers)
    readable = sum(1 for w, _ in workers if w.environ_state == "readable")
    parts = [f"/proc/PID/environ read for {readable}/{n} workers"]
    with_log = sum(1 for w, _ in workers if w.pid in nccl)
    if with_log:
        parts.append(
            f"NCCL 'set by environment' lines for {with_log}/{n} workers"
            + (f" in {log_path}" if log_path else "")
        )
    elif log_path:
        parts.append(f"no NCCL proof lines in {log_path}")
    if launcher is not None:
        parts.append(f"launcher pid {launcher.pid} environ {launcher.environ_state}")
    return "; ".join(parts)
