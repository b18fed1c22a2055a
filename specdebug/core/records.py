"""The session journal's records: one model per kind, written and read back through the same models.

Every conclusion of a session is replayed from these (history, report, bisect --resume, the
trial cache, the startup ETA, another seat's actions), so a reader gets a typed record or none: a
line that does not validate is skipped with a sentence naming the field (core.journal.Journal).

On disk a record is one flat JSON object, as written since the first journal: the envelope
(`kind`, `ts`; a box journal's `eid`, `by`, `uid`; the pairing `seat`; `node` of a deployment)
beside the fields of what it records (a ServerRecord, a Verdict, a BenchResult...).  In memory
that payload is its own model (`LaunchRecord.server`), so the flat line is split on read and
flattened on write.  One clash is mended on the way: a BenchResult's own `kind` (builtin,
external, parsed) was overwritten by the envelope's; it travels as `bench_kind`.  A kind this
version does not know reads as OtherRecord with its fields kept (a newer writer's records).
"""

from __future__ import annotations

import functools
import json
import time
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from specdebug.core.bench.models import BenchResult
from specdebug.core.bisect.models import BisectOptions, Judged, KnobRow, Measurement, Result
from specdebug.core.control.events import Verdict
from specdebug.core.control.records import ServerRecord, StopResult
from specdebug.core.deployment.tracker import DeploymentVerdict
from specdebug.core.model import Model
from specdebug.core.source import ServerSource

# what the journal adds to every record it writes (never a payload's field)
STAMPS = ("eid", "by", "uid", "seat", "node")
READ_ONLY = ("forged", "by_claimed", "by_verified")  # set by a box journal's reader, never written


class Record(Model):
    """The envelope every journal record carries."""

    model_config = ConfigDict(extra="ignore")

    kind: str
    ts: float = Field(default_factory=time.time, allow_inf_nan=False, ge=0)  # unix seconds
    eid: str | None = None  # box journal: the writer's id of this record (core.boxjournal)
    by: str | None = None  # box journal: the login that wrote it, as the box saw it
    uid: int | None = None
    seat: str | None = None  # pairing: the seat that typed it (core.pair.session)
    node: str | None = None  # the deployment node it concerns (None: a one-node server, today)
    # box journal, set by the reader (core.boxjournal.attribute), never written: the record claims
    # another writer than its file's owner (what it claimed is kept), or its file is shared and the
    # writer cannot be told
    forged: bool = False
    by_claimed: str | None = None
    by_verified: bool | None = None

    # the payload model whose fields sit at the top level on disk, and its attribute here
    PAYLOAD: ClassVar[tuple[str, type[BaseModel]] | None] = None

    @model_validator(mode="before")
    @classmethod
    def _nest(cls, data: Any) -> Any:
        """The flat line -> envelope + payload (a record built in code passes through)."""
        if cls.PAYLOAD is None or not isinstance(data, dict):
            return data
        attr, model = cls.PAYLOAD
        if attr in data and isinstance(data[attr], BaseModel | dict):
            return data
        own = set(cls.model_fields) - {attr}
        payload = {k: v for k, v in data.items() if k in model.model_fields and k not in ("kind", "ts")}
        rest = {k: v for k, v in data.items() if k in own or k not in model.model_fields}
        return {**rest, attr: cls._payload_in(payload, data)}

    @classmethod
    def _payload_in(cls, payload: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
        return payload

    def _payload_out(self, payload: dict[str, Any]) -> dict[str, Any]:
        return payload

    def to_json(self) -> dict[str, Any]:
        """The record as its line on disk: flat, stamps only when set."""
        # a record of its own fields leaves its unset top-level ones out; what it nests (a knob whose
        # value is absent on one side, a payload) is written whole: a nested None left out read back
        # as "missing" and the record was refused (bisect_start: --resume, history, report, issue 39)
        out = self.model_dump(mode="json", exclude=set(READ_ONLY))
        if self.PAYLOAD is None:
            out = {k: v for k, v in out.items() if v is not None}
        for name in STAMPS:
            if out.get(name) is None:
                out.pop(name, None)
        if self.PAYLOAD is not None:
            attr, _model = self.PAYLOAD
            payload = self._payload_out(out.pop(attr))
            out = {**payload, **out}  # the envelope's kind and ts over a payload's own (BenchResult.kind)
        return out


class LaunchRecord(Record):
    """A server launched, or attached to (`server.attached`)."""

    PAYLOAD = ("server", ServerRecord)
    kind: Literal["launch"] = "launch"
    server: ServerRecord
    drift: Any = None  # the box's snapshot at launch (core.drift): what changed between ends

    @property
    def host(self) -> str:
        return self.server.host

    @property
    def source(self) -> ServerSource | None:
        return self.server.source


class VerdictRecord(Record):
    """How a startup ended (ready or failed): the startup ETA's history."""

    PAYLOAD = ("outcome", Verdict)
    kind: Literal["verdict"] = "verdict"
    outcome: Verdict
    host: str | None = None


class DeploymentVerdictRecord(Record):
    """How a deployment's startup ended, every node's state with it (core.deployment.control)."""

    PAYLOAD = ("outcome", DeploymentVerdict)
    kind: Literal["deployment_verdict"] = "deployment_verdict"
    outcome: DeploymentVerdict


class StopRecord(Record):
    """A server stopped (or a stop refused)."""

    PAYLOAD = ("stop", StopResult)
    kind: Literal["stop"] = "stop"
    stop: StopResult
    host: str | None = None


class BenchResultRecord(Record):
    """One benchmark result, with everything needed to trust it later."""

    PAYLOAD = ("result", BenchResult)
    kind: Literal["bench_result"] = "bench_result"
    result: BenchResult
    source: ServerSource | None = None  # the measured server's source (its launch record), when proven

    @classmethod
    def _payload_in(cls, payload: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
        if "bench_kind" in data:
            payload = {**payload, "kind": data["bench_kind"]}
        return payload

    def _payload_out(self, payload: dict[str, Any]) -> dict[str, Any]:
        payload = dict(payload)
        payload["bench_kind"] = payload.pop("kind")
        return payload

    @property
    def host(self) -> str | None:
        return self.result.host

    @property
    def fingerprint(self) -> str | None:
        return self.result.fingerprint


class MarkRecord(Record):
    """A mark: a log position the user marked, a note from the command line, or the baseline."""

    kind: Literal["mark"] = "mark"
    label: str | None = None
    host: str | None = None
    pane: str | None = None
    n: int | None = None
    path: str | None = None
    offset: int | None = None
    matches: int | None = None
    result_ts: float | None = None  # the baseline mark: which result (by its journal time)
    include_failed: bool = False  # the baseline mark: a failed result chosen on purpose
    origin: str | None = None  # "cli": typed on the command line (older records: `source`)

    @model_validator(mode="before")
    @classmethod
    def _old_origin(cls, data: Any) -> Any:
        if isinstance(data, dict) and "origin" not in data and isinstance(data.get("source"), str):
            data = {**data, "origin": data["source"]}
            del data["source"]
        return data


class BisectEnd(Model):
    """One end of a bisection as its start record names it (the profile file: what --resume loads)."""

    name: str = ""
    file: str = ""
    fingerprint: str = ""


class BisectStartRecord(Record):
    """A bisection began: its ends, settings, options and knobs (what --resume continues)."""

    kind: Literal["bisect_start"] = "bisect_start"
    bisect: str = ""
    good: BisectEnd = Field(default_factory=BisectEnd)
    bad: BisectEnd = Field(default_factory=BisectEnd)
    settings: str = ""
    options: BisectOptions = Field(default_factory=BisectOptions)
    knobs: list[KnobRow] = Field(default_factory=list)


class BisectTrialRecord(Record):
    """One measurement of one config (the trial cache's unit)."""

    PAYLOAD = ("trial", Measurement)
    kind: Literal["bisect_trial"] = "bisect_trial"
    trial: Measurement


class BisectJudgementRecord(Record):
    """A judgement by hand (kept as a record, never replayed)."""

    kind: Literal["bisect_judgement"] = "bisect_judgement"
    bisect: str
    fingerprint: str
    settings: str | None = None
    judged: Judged


class BisectResultRecord(Record):
    """A bisection's result (the verb's JSON object)."""

    PAYLOAD = ("result", Result)
    kind: Literal["bisect_result"] = "bisect_result"
    result: Result


class BisectLaunchRecord(Record):
    """A bisection started a server: what a resume may have to stop as its own."""

    kind: Literal["bisect_launch"] = "bisect_launch"
    profile: str = ""
    pid: int
    port: int | None = None
    bisect: str | None = None
    host: str | None = None


class BisectStopRecord(Record):
    """A bisection stopped a server it started."""

    kind: Literal["bisect_stop"] = "bisect_stop"
    profile: str = ""
    pid: int
    host: str | None = None


class SpecAdviceTryRecord(Record):
    """`spec --advise --try`: the advised depth launched and benchmarked, its prediction checked
    (core.spec.tryout): what was predicted beside what was measured."""

    kind: Literal["spec_advice_try"] = "spec_advice_try"
    profile: str  # the profile the advised depth was applied to
    config: str  # the tried config's name (and its server record's)
    depth: int
    flags: str = ""  # the flags that set the depth
    fingerprint: str | None = None
    predicted_tok_s: float | None = Field(default=None, allow_inf_nan=False)
    low: float | None = Field(default=None, allow_inf_nan=False)
    high: float | None = Field(default=None, allow_inf_nan=False)
    measured_tok_s: float | None = Field(default=None, allow_inf_nan=False)
    error_pct: float | None = Field(default=None, allow_inf_nan=False)  # (predicted - measured) / measured
    inside: bool | None = None  # the measurement lies within [low, high]
    result_ts: float | None = None  # when the benchmark result finished (its finished_at)
    reason: str | None = None  # why nothing was measured (failed start, failed benchmark)
    host: str | None = None


class OtherRecord(Record):
    """A kind this version does not know (a note, a newer writer's record): its fields are kept."""

    model_config = ConfigDict(extra="allow")


KNOWN: dict[str, type[Record]] = {
    cls.model_fields["kind"].default: cls
    for cls in (
        LaunchRecord,
        VerdictRecord,
        DeploymentVerdictRecord,
        StopRecord,
        BenchResultRecord,
        MarkRecord,
        BisectStartRecord,
        BisectTrialRecord,
        BisectJudgementRecord,
        BisectResultRecord,
        BisectLaunchRecord,
        BisectStopRecord,
        SpecAdviceTryRecord,
    )
}


def _tag(value: Any) -> str:
    kind = value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)
    return kind if kind in KNOWN else "other"


JournalRecord = Annotated[
    Annotated[LaunchRecord, Tag("launch")]
    | Annotated[VerdictRecord, Tag("verdict")]
    | Annotated[DeploymentVerdictRecord, Tag("deployment_verdict")]
    | Annotated[StopRecord, Tag("stop")]
    | Annotated[BenchResultRecord, Tag("bench_result")]
    | Annotated[MarkRecord, Tag("mark")]
    | Annotated[BisectStartRecord, Tag("bisect_start")]
    | Annotated[BisectTrialRecord, Tag("bisect_trial")]
    | Annotated[BisectJudgementRecord, Tag("bisect_judgement")]
    | Annotated[BisectResultRecord, Tag("bisect_result")]
    | Annotated[BisectLaunchRecord, Tag("bisect_launch")]
    | Annotated[BisectStopRecord, Tag("bisect_stop")]
    | Annotated[SpecAdviceTryRecord, Tag("spec_advice_try")]
    | Annotated[OtherRecord, Tag("other")],
    Discriminator(_tag),
]
"""One journal record: the union of the kinds, told apart by `kind` (any other kind: OtherRecord)."""


@functools.cache
def _record_adapter() -> TypeAdapter[JournalRecord]:
    """Built on the first record read (building it builds every kind's model: see core/model.py)."""
    return TypeAdapter(JournalRecord)


def parse_record(data: Any) -> JournalRecord:
    """A decoded line -> its record (pydantic.ValidationError: it is not one; see problem_of)."""
    return _record_adapter().validate_python(data)


def problem_of(kind: str, exc: ValidationError) -> str:
    """One line saying why a record of `kind` does not validate: the first field and what is wrong."""
    first = exc.errors()[0]
    loc = [str(p) for p in first["loc"][1:]]  # [0] is the union's tag
    attrs = {attr for attr, _m in (c.PAYLOAD for c in KNOWN.values() if c.PAYLOAD)}
    if loc and loc[0] in attrs:  # a payload field sits at the top level on disk
        loc = loc[1:]
    name = ".".join(loc) or "the record"
    typ = first["type"]
    if typ == "missing":
        return f"{kind} record: {name} is missing"
    what = shown(first.get("input"))
    if typ in ("enum", "literal_error"):
        expected = str(first.get("ctx", {}).get("expected", "")).replace("'", "").replace(" or ", ", ")
        return f"{kind} record: {name} is {what}, not one of {expected}"
    if typ in _TYPES:
        return f"{kind} record: {name} is {what}, not {_TYPES[typ]}"
    return f"{kind} record: {name} is {what}: {first['msg']}"


_TYPES = {
    "string_type": "a str",
    "int_type": "an int",
    "int_parsing": "an int",
    "int_from_float": "an int",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "a bool",
    "bool_parsing": "a bool",
    "dict_type": "an object",
    "list_type": "a list",
    "finite_number": "a time",
    "greater_than_equal": "a time",
}


def shown(value: Any) -> str:
    text = "missing" if value is None else json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def profile_of(rec: JournalRecord) -> str | None:
    """The profile a launch, verdict or stop record is about (None: another kind)."""
    if isinstance(rec, LaunchRecord):
        return rec.server.profile
    if isinstance(rec, VerdictRecord):
        return rec.outcome.profile
    if isinstance(rec, StopRecord):
        return rec.stop.profile
    return None
