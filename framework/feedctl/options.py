"""Feed options: defaults, and the combinations CockroachDB rejects (reference §2).

`sink_kind` is cloudstorage, kafka, webhook, null, `sinkless` for a feed without a sink, or None when the
sink is unknown (reported elsewhere; sink-specific rules are then skipped).

A feed's options as written (YAML) stay a dict; `resolve` makes them `Options`, every option typed, which is
what compiling, a job's definition and its batches carry. Stored (a job's definition, target/manifest.json)
and hashed (`definition_hash`) as `Options.to_json()`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from enum import StrEnum

from feedctl.diagnostics import Severity
from feedctl.units import parse_duration, parse_size, parse_timestamp

DEFAULTS = {
    "resolved": None,
    "min_checkpoint_frequency": "30s",
    "updated": False,
    "diff": False,
    "mvcc_timestamp": False,
    "envelope": "wrapped",  # `bare` for CDC queries, as in CockroachDB
    "enriched_properties": [],
    "format": "json",
    "initial_scan": "yes",  # `no` when a cursor is given
    "cursor": None,
    "end_time": None,
    "schema_change_policy": "backfill",
    "schema_change_events": "default",
    "execution_locality": None,
    "range_distribution_strategy": "default",
    "key_in_value": False,  # forced on for cloud storage and webhooks
    "topic_in_value": False,  # forced on for webhooks
    "full_table_name": False,
    "on_error": "fail",
    "batch_rows": 2_000_000,
    "batch_bytes": "256MiB",
    "metrics_label": None,  # metrics of feeds without one carry `scope="default"`
}

SINK_DEFAULTS = {
    "file_size": "16MiB",
    "partition_format": "daily",
    "compression": None,
    "topic_prefix": "",
    "storage_options": {},
}


def resolve_sink(options: dict) -> dict:
    """A sink's options with defaults filled in."""
    return {**SINK_DEFAULTS, **{k: v for k, v in options.items() if v is not None}}


# The values of the options that take one of a fixed set (project/schemas/feeds.schema.json). As StrEnums they
# equal their strings, hash as them and serialize to JSON as them.


class Envelope(StrEnum):
    WRAPPED = "wrapped"
    BARE = "bare"
    KEY_ONLY = "key_only"
    ROW = "row"
    ENRICHED = "enriched"


class Format(StrEnum):
    JSON = "json"
    CSV = "csv"
    PARQUET = "parquet"
    AVRO = "avro"


class InitialScan(StrEnum):
    YES = "yes"
    NO = "no"
    ONLY = "only"


class SchemaChangePolicy(StrEnum):
    BACKFILL = "backfill"
    NOBACKFILL = "nobackfill"
    STOP = "stop"

    @property
    def action(self) -> SchemaChangeAction:
        """What a job under this policy does at a version that changes a table's schema."""
        return SchemaChangeAction(self.value)


class SchemaChangeAction(StrEnum):
    """What a job does at a version that changes a table's schema: its policy, or why not (stored in intents)."""

    BACKFILL = "backfill"
    NOBACKFILL = "nobackfill"
    STOP = "stop"
    NONE = "none"  # no event for the feed (`schema_change_events`): its changes are read as any others
    FAIL = "fail"  # its query reads a dropped column: the job cannot run past the version
    WAIT = "wait"  # a key change found there, taken once every batch before it is emitted


class SchemaChangeEvents(StrEnum):
    DEFAULT = "default"
    COLUMN_CHANGES = "column_changes"


class RangeDistributionStrategy(StrEnum):
    DEFAULT = "default"
    BALANCED_SIMPLE = "balanced_simple"


class OnError(StrEnum):
    FAIL = "fail"
    PAUSE = "pause"


@dataclass(frozen=True)
class Options:
    """Every option of a feed, resolved (`resolve`): one field per entry of `DEFAULTS`, in its order (the order
    of the stored JSON). Never changed in place: `with_values` makes new options."""

    resolved: bool | str | None  # True: at every checkpoint; a duration: at most that often; None: never
    min_checkpoint_frequency: str  # a duration
    updated: bool
    diff: bool
    mvcc_timestamp: bool
    envelope: Envelope
    enriched_properties: tuple[str, ...]
    format: Format
    initial_scan: InitialScan
    cursor: str | None  # as written: a timestamp or `version:<n>`
    end_time: str | None
    schema_change_policy: SchemaChangePolicy
    schema_change_events: SchemaChangeEvents
    execution_locality: str | None
    range_distribution_strategy: RangeDistributionStrategy
    key_in_value: bool
    topic_in_value: bool
    full_table_name: bool
    on_error: OnError
    batch_rows: int
    batch_bytes: int | None  # parsed; None when not a size, which the schema refuses
    metrics_label: str | None
    # What a later feedctl stored that this one does not know (nodes upgraded one by one share jobs): kept as
    # stored, so that a definition written back by this node loses none of it.
    later: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def scans(self) -> bool:
        """Whether a job scans its tables at its start (`initial_scan` yes or only)."""
        return self.initial_scan != InitialScan.NO

    def with_values(self, values: dict) -> Options:
        """These options with `values` (option → its JSON value, as an `OptionChange` holds them) over them."""
        return replace(self, **{name: _typed(name, value) for name, value in values.items()})

    def in_place(self) -> dict:
        """The options a running job takes in place (`IN_PLACE_OPTIONS`), as stored."""
        stored = self.to_json()
        return {name: stored[name] for name in IN_PLACE_OPTIONS}

    def to_json(self) -> dict:
        """As stored (job definitions, target/manifest.json) and hashed: valued options as their strings, lists
        as lists, in the order of `DEFAULTS`."""
        return {**{name: _plain(getattr(self, name)) for name in DEFAULTS}, **self.later}

    @staticmethod
    def from_json(stored: dict, has_query: bool) -> Options:
        """Options as stored; one not stored (it did not exist then) at its default, as `resolve` gives it."""
        options = _options({**resolve({}, None, has_query).to_json(), **stored})
        later = {name: value for name, value in stored.items() if name not in DEFAULTS}
        return replace(options, later=later) if later else options


_ENUMS = {
    "envelope": Envelope,
    "format": Format,
    "initial_scan": InitialScan,
    "schema_change_policy": SchemaChangePolicy,
    "schema_change_events": SchemaChangeEvents,
    "range_distribution_strategy": RangeDistributionStrategy,
    "on_error": OnError,
}


def _typed(name: str, value):
    """An option's value as `Options` holds it; ValueError for a value its option does not take."""
    if name in _ENUMS:
        return _ENUMS[name](value)
    if name == "enriched_properties":
        return tuple(value)
    return value


def _plain(value):
    if isinstance(value, StrEnum):
        return value.value
    if isinstance(value, tuple):
        return list(value)
    return value


def _options(values: dict) -> Options:
    """`Options` of every option's value (a name `DEFAULTS` does not have is not among them)."""
    return Options(**{name: _typed(name, values[name]) for name in DEFAULTS})


_NOT_WITH_ONLY = ("resolved", "diff", "updated", "mvcc_timestamp", "end_time")


@dataclass(frozen=True)
class Rule:
    option: str
    code: str
    message: str
    expected: str = ""
    hint: str = ""
    severity: Severity = Severity.ERROR


# Where a new job starts: options of a job's start, not of its feed's definition. A job keeps those it was
# created with, so removing a one-off cursor from the YAML later changes nothing.
START_OPTIONS = ("cursor", "initial_scan")

# Options a running job takes in place from its next batch on (CockroachDB's `ALTER CHANGEFEED ... SET`): they
# change what later messages carry, how often time is resolved, how batches are sized or what an error does;
# never which rows a job emits, in which format, or where.
IN_PLACE_OPTIONS = (
    "resolved",
    "min_checkpoint_frequency",
    "diff",
    "updated",
    "mvcc_timestamp",
    "key_in_value",
    "topic_in_value",
    "on_error",
    "batch_rows",
    "batch_bytes",
    "metrics_label",
)

# Why a change of any other option needs a new job (`feedctl plan` says it).
NEW_JOB_REASONS = {
    "format": "a sink's files or topics hold one format, which their consumers parse",
    "envelope": "consumers parse one envelope",
    "enriched_properties": "consumers parse one envelope",
    "full_table_name": "topic names, and so file names, would change",
    "end_time": "where the job ends is part of what it emits",
    "schema_change_policy": "batches already cut were planned under the old policy",
    "schema_change_events": "batches already cut were planned under the old events",
    "execution_locality": "the job's spans are placed by it",
    "range_distribution_strategy": "the job's spans are placed by it",
}


def _set(options: dict, name: str) -> bool:
    """Whether an option is on: a true flag, or any value for valued options."""
    value = options.get(name)
    return value is not None and value is not False


def resolve(options: dict, sink_kind: str | None, has_query: bool) -> Options:
    """Every option with its default filled in, typed, as the runner will use it. ValueError for a value an
    option does not take, which the schema refuses first."""
    out = dict(DEFAULTS)
    if has_query:
        out["envelope"] = "bare"
    if options.get("cursor") is not None:
        out["initial_scan"] = "no"
    out.update({k: v for k, v in options.items() if v is not None})
    if sink_kind in ("cloudstorage", "webhook"):
        out["key_in_value"] = True
    if sink_kind == "webhook":
        out["topic_in_value"] = True
    out["batch_bytes"] = or_none(parse_size, out["batch_bytes"])
    return _options(out)


def or_none(parse, value):
    try:
        return parse(value)
    except (ValueError, TypeError):
        return None


def check(options: dict, sink_kind: str | None, has_query: bool) -> list[Rule]:
    o = resolve(options, sink_kind, has_query)
    rules: list[Rule] = []

    def reject(option, message, expected="", hint=""):
        rules.append(Rule(option, "FC301", message, expected, hint))

    if o.format == Format.CSV and o.initial_scan != InitialScan.ONLY:
        reject(
            "format",
            "format: csv is only usable with initial_scan: only",
            expected='initial_scan: "only", or another format',
        )
    if o.initial_scan == InitialScan.ONLY:
        for name in _NOT_WITH_ONLY:
            if _set(options, name):
                reject(
                    name,
                    f"{name} cannot be used with initial_scan: only",
                    hint="an initial-scan-only feed exports the tables once and finishes",
                )
    envelope, fmt = o.envelope, o.format
    if envelope in (Envelope.KEY_ONLY, Envelope.ROW) and sink_kind not in ("kafka", "sinkless", "null", None):
        reject(
            "envelope",
            f"envelope: {envelope} is only usable with a Kafka sink or without a sink",
            expected="envelope: wrapped or bare",
        )
    if envelope == Envelope.ENRICHED and sink_kind == "cloudstorage":
        reject(
            "envelope",
            "envelope: enriched is not usable with cloud storage sinks",
            expected="envelope: wrapped or bare",
        )
    if o.enriched_properties and envelope != Envelope.ENRICHED:
        reject("enriched_properties", "enriched_properties needs envelope: enriched")
    if envelope == Envelope.ROW and o.diff:
        reject("diff", "diff cannot be used with envelope: row", hint="a row envelope has no place for `before`")
    if envelope == Envelope.KEY_ONLY and o.diff:
        reject("diff", "diff cannot be used with envelope: key_only")
    if fmt == Format.PARQUET:
        if sink_kind not in ("cloudstorage", "null", None):
            reject("format", "format: parquet is only usable with cloud storage sinks")
        if o.topic_in_value and sink_kind != "webhook":
            reject("topic_in_value", "topic_in_value cannot be used with format: parquet")
    if fmt == Format.AVRO and sink_kind not in ("cloudstorage", "null", None):
        reject("format", "format: avro is only usable with cloud storage sinks (container files with the schema)")
    if fmt in (Format.PARQUET, Format.AVRO, Format.CSV) and envelope not in (Envelope.WRAPPED, Envelope.BARE):
        reject(
            "envelope", f"envelope: {envelope} cannot be used with format: {fmt}", expected="envelope: wrapped or bare"
        )

    if fmt in (Format.AVRO, Format.CSV) and envelope != Envelope.WRAPPED:
        for name in ("updated", "mvcc_timestamp", "diff", "key_in_value", "topic_in_value"):
            if _set(options, name):
                reject(
                    name,
                    f"{name} cannot be used with envelope: {envelope} and format: {fmt}",
                    expected="envelope: wrapped, or format: json",
                )

    rules.extend(_check_times(options, o))
    return rules


def _check_times(options: dict, o: Options) -> list[Rule]:
    rules: list[Rule] = []
    points = {}
    for name, allow_version in (("cursor", True), ("end_time", False)):
        if options.get(name) is None:
            continue
        try:
            points[name] = parse_timestamp(options[name], allow_version=allow_version)
        except ValueError:
            forms = "an event timestamp (1632241564629087669.0000000000), nanoseconds or an RFC 3339 time"
            rules.append(
                Rule(
                    name,
                    "FC109",
                    f"{options[name]!r} is not a valid {name}",
                    expected=forms + (", or version:<n>" if allow_version else ""),
                )
            )
    cursor, end = points.get("cursor"), points.get("end_time")
    if cursor and cursor.hlc and cursor.hlc.wall > time.time_ns():  # as CockroachDB refuses it
        rules.append(
            Rule(
                "cursor",
                "FC307",
                f"cursor {options['cursor']} is in the future: a job starts at a time that has passed",
                expected="a time at or before now",
            )
        )
    if cursor and end and cursor.hlc and end.hlc and end.hlc <= cursor.hlc:
        rules.append(Rule("end_time", "FC304", "end_time is not after cursor", expected=f"a time after {cursor.hlc}"))
    resolved = options.get("resolved")
    if isinstance(resolved, str):
        try:
            minimum = parse_duration(o.min_checkpoint_frequency)
            if parse_duration(resolved) < minimum:
                rules.append(
                    Rule(
                        "resolved",
                        "FC303",
                        f"resolved: {resolved} is shorter than min_checkpoint_frequency: "
                        f"{o.min_checkpoint_frequency}; resolved timestamps are emitted no more often than "
                        "checkpoints",
                        hint=f"set min_checkpoint_frequency: {resolved} to get them every {resolved}",
                        severity=Severity.WARNING,
                    )
                )
        except ValueError:
            pass  # a malformed duration is a schema error already
    return rules
