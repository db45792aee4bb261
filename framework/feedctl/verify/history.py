"""What a feed should have emitted for one table: every state of every key in the job's range, read from the
Delta change data feed, or from the table's snapshots where a version has none, by the second reader
(`verify.second_reader`, which shares no code with the reader that produced the messages), at the event
timestamps the job recorded, passed through the feed's CDC query (evaluated by DuckDB), and encoded as the
messages' `after`/`before` objects.

A commit's before and after images of a key pair up: both make an update, only an after image an insert,
only a before image a delete. A delete and an insert of an identical row in one commit (a file rewritten
without change data) is no change.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import polars as pl
from deltalake.exceptions import DeltaError

from feedctl import frame
from feedctl.diagnostics import first_line
from feedctl.encoding.json import key_json, object_json
from feedctl.frame import AFTER_TYPES, CHANGE_TYPE, VERSION
from feedctl.job.key_change import KeyChange
from feedctl.options import Options, SchemaChangeAction
from feedctl.sinks.messages import canonical
from feedctl.source import schema_change
from feedctl.source.delta import SourceError
from feedctl.tasks.query import json_outputs
from feedctl.units import Hlc
from feedctl.verify.second_reader import CannotJudge, SecondReader

ROW_ID = "__rowid"


# What keeps the second reader from reading the history it judges by: a file gone (vacuumed), a version
# cleaned from the log, a table that cannot be opened. Said, never guessed, never a traceback.
UNREADABLE = (CannotJudge, SourceError, OSError, DeltaError)


@dataclass(frozen=True)
class TableHistory:
    """One table of a job: where it is, its key, and the recorded event timestamp of each version."""

    name: str
    location: str
    storage_options: dict
    key: list[str]  # as the job emits the table now
    start_version: int  # the job started after this version (and scanned it, with an initial scan)
    event_ts: dict[int, Hlc]  # version -> recorded event timestamp
    key_changes: tuple[KeyChange, ...] = ()  # the table's, recorded by the job
    scanned_at: Hlc | None = None  # the event timestamp of its scan (the job's start; or added since), if any
    changes: str = "auto"  # where the feed reads its changes from (`source/change_source.py`)

    def key_at(self, version: int) -> list[str]:
        """The key the job emitted the table's changes of `version` under."""
        later = [c for c in self.key_changes if version < c.version]
        return list(later[0].before.primary_key) if later else self.key


@dataclass(frozen=True)
class Expected:
    """One state of one key the feed's query selects: the message that must carry it."""

    key: str
    ts: Hlc
    after: str | None
    before: str | None


def _open(t: TableHistory, version: int | None = None):
    from deltalake import DeltaTable

    return DeltaTable(t.location, version=version, storage_options=t.storage_options or None)


def _second(t: TableHistory) -> SecondReader:
    return SecondReader(t.name, t.location, t.storage_options)


def row_schema(t: TableHistory, version: int) -> pl.Schema:
    """The table's columns and their types, as the feed reads them."""
    return pl.from_arrow(_second(t).schema(max(version, 0)).empty_table()).schema


def _changes(
    t: TableHistory,
    first: int,
    last: int,
    columns: list[str],
    key: list[str],
    compared: list[str] | None = None,
    backfilled: bool = False,
    rekeyed: KeyChange | None = None,
    unread: dict[int, str] | None = None,
) -> pl.DataFrame:
    """Paired changes of the recorded versions from `first` to `last` (of one schema and `key`, read as of
    `last`): the table's columns as after the change (only the key for a delete), `cdc_prev` (the row
    before), the op and the event timestamp. A row rewritten as it was is no change; in version `first`, when
    it changed the schema, a row as it was in the columns `compared`, and when the table is `backfilled`
    there, any but a delete (the backfill holds the row). When `first` gave the table its new key's columns
    (`rekeyed`), a before image has them from its old key's after image there."""
    versions = sorted(v for v in t.event_ts if first <= v <= last)
    cdf = _history(t, versions, key, unread)
    if cdf is None:
        return pl.DataFrame()
    ids = [*key, VERSION]
    is_after = pl.col(CHANGE_TYPE).is_in(AFTER_TYPES)
    if rekeyed is not None and rekeyed.filled:
        old, at = list(rekeyed.before.primary_key), pl.col(VERSION) == first
        given = (
            cdf.filter(is_after & at).group_by(old).agg([pl.col(c).max().alias(f"__new_{c}") for c in rekeyed.filled])
        )
        cdf = cdf.join(given, on=old, how="left", nulls_equal=True).with_columns(
            [pl.when(~is_after & at).then(pl.col(f"__new_{c}")).otherwise(pl.col(c)).alias(c) for c in rekeyed.filled]
        )
    from_update = pl.col(CHANGE_TYPE).str.starts_with("update_")
    afters = (
        cdf.filter(is_after)
        .unique(ids, keep="last", maintain_order=True)
        .select(*ids, pl.struct(columns).alias("__a"), from_update.alias("__ua"))
    )
    befores = (
        cdf.filter(~is_after)
        .unique(ids, keep="last", maintain_order=True)
        .select(*ids, pl.struct(columns).alias(frame.BEFORE), from_update.alias("__ub"))
    )
    pairs = afters.join(befores, on=ids, how="full", coalesce=True, nulls_equal=True)
    same = pl.col("__a").eq_missing(pl.col(frame.BEFORE))
    if compared is not None:
        same = (
            pl.when(pl.col(VERSION) == first)
            .then(
                pl.struct([pl.col("__a").struct.field(c) for c in compared]).eq_missing(
                    pl.struct([pl.col(frame.BEFORE).struct.field(c) for c in compared])
                )
            )
            .otherwise(same)
        )
    rewritten = ~pl.col("__ua").fill_null(False) & ~pl.col("__ub").fill_null(False) & pl.col("__a").is_not_null() & same
    op = (
        pl.when(pl.col("__a").is_null())
        .then(pl.lit("delete"))
        .when(pl.col(frame.BEFORE).is_null())
        .then(pl.lit("insert"))
        .otherwise(pl.lit("update"))
    )
    held = pl.lit(backfilled) & (pl.col(VERSION) == first) & pl.col("__a").is_not_null()
    pairs = pairs.filter(~rewritten & ~held)
    stamps = pl.DataFrame(
        {
            VERSION: versions,
            frame.TS_WALL: [t.event_ts[v].wall for v in versions],
            frame.TS_LOGICAL: [t.event_ts[v].logical for v in versions],
        },
        schema={VERSION: pairs.schema[VERSION], frame.TS_WALL: pl.Int64, frame.TS_LOGICAL: pl.Int64},
    )
    return pairs.join(stamps, on=VERSION).select(
        *[pl.col(c) if c in key else pl.col("__a").struct.field(c) for c in columns],
        pl.col(frame.BEFORE),
        op.alias(frame.OP),
        frame.TS_WALL,
        frame.TS_LOGICAL,
    )


def _history(t: TableHistory, versions: list[int], key: list[str], unread: dict[int, str] | None):
    """The change rows of `versions` as the second reader reads them; where a version cannot be read, the
    others alone, and why in `unread` (None: none of them)."""
    if not versions:
        return None

    def read(first: int, last: int) -> pl.DataFrame:
        return pl.from_arrow(_second(t).changes(first, last, key, change_files=t.changes != "log"))

    try:
        return read(versions[0], versions[-1])
    except UNREADABLE:
        if unread is None:
            raise
    parts = []
    for version in versions:
        try:
            parts.append(read(version, version))
        except UNREADABLE as exc:
            unread[version] = first_line(exc)
    return pl.concat(parts, how="diagonal_relaxed") if parts else None


def _scan(t: TableHistory, version: int, columns: list[str], at: Hlc) -> pl.DataFrame:
    """The snapshot at `version`, every row an insert at `at`: an initial scan, or a backfill."""
    rows = pl.from_arrow(_second(t).rows(version))
    before = pl.lit(None, pl.Struct({c: rows.schema[c] for c in columns}))
    return rows.select(
        *columns,
        before.alias(frame.BEFORE),
        pl.lit("insert").alias(frame.OP),
        pl.lit(at.wall, pl.Int64).alias(frame.TS_WALL),
        pl.lit(at.logical, pl.Int64).alias(frame.TS_LOGICAL),
    )


def expected_states(
    t: TableHistory,
    sql: str | None,
    scan: bool,
    start: Hlc,
    diff: bool,
    options: Options,
    read: list[str] | None,
    json_values: bool = False,
) -> tuple[list[Expected], dict[Hlc, str]]:
    """Every message the job should emit for the table, in no particular order, run by run of versions of
    one schema: a message carries the columns of its version's schema. A run opened by a schema change
    begins with the change's own row changes (without the rows it only rewrote; under `backfill`, its
    deletes, then the table at the change). `options`: the feed's; `read`: the columns its query reads (None:
    all); `json_values`: messages hold a VARIANT as the JSON it is (JSON messages), not as its text. And the
    event timestamps whose history cannot be read any more (a version vacuumed; a scan of a
    version whose files are gone), with what was not read: their messages cannot be judged."""
    from feedctl.source.delta import DeltaSource, SourceError

    source = DeltaSource(t.name, t.location, t.storage_options)
    version = max(t.event_ts, default=t.start_version)
    changed = source.schema_changes(t.start_version, version)
    rekeys = {c.version: c for c in t.key_changes if t.start_version < c.version <= version}
    firsts = sorted({t.start_version, *changed, *rekeys})
    out, unjudged = [], {}

    def scanned(version: int, columns: list[str], at: Hlc) -> pl.DataFrame:
        try:
            return _scan(t, version, columns, at)
        except UNREADABLE as exc:
            unjudged[at] = f"{t.name}: the scan of version {version}: {first_line(exc)}"
            return pl.DataFrame()

    for first, last in zip(firsts, [f - 1 for f in firsts[1:]] + [version]):
        columns = source.schema(max(first, 0)).names
        compared, act = None, None
        if first in changed:
            compared = [c for c in columns if c in source.schema(first - 1).names]
            try:
                act = schema_change.action(source.schema_change(first), options, read)
            except SourceError:  # refused (column mapping): the job stops before it
                break
            if act == SchemaChangeAction.FAIL:  # the job's query cannot run past it: the job stops before it
                break
        if first in rekeys:  # a key change is always an event
            act = options.schema_change_policy.action
        backfill, key = act == SchemaChangeAction.BACKFILL, _second(t).names_at(max(first, 0), t.key_at(first))
        unread: dict[int, str] = {}
        parts = [_changes(t, first, last, columns, key, compared, backfill, rekeys.get(first), unread)]
        unjudged.update({t.event_ts[v]: f"{t.name}: version {v}: {why}" for v, why in unread.items()})
        if scan and first == t.start_version >= 0:
            parts.insert(0, scanned(first, columns, start))
        if backfill:
            parts.append(scanned(first, columns, t.event_ts[first]))
        variants = _second(t).variants(max(first, 0)) if json_values else ()
        json_columns = json_outputs(sql, columns, variants)
        out += _states([p for p in parts if p.height], columns, key, sql, start, diff, json_columns)
    return out, unjudged


def _states(
    parts: list[pl.DataFrame],
    columns: list[str],
    key: list[str],
    sql: str | None,
    start: Hlc,
    diff: bool,
    json_columns: tuple[str, ...],
) -> list[Expected]:
    """The messages of rows of one schema and key."""
    if not parts:
        return []
    view = pl.concat(parts, how="vertical_relaxed").with_row_index(ROW_ID)
    if sql is None:
        deleted = pl.col(frame.OP) == "delete"
        out = view.select(ROW_ID, pl.when(~deleted).then(pl.struct(columns)).alias(frame.AFTER), pl.col(frame.BEFORE))
    else:
        from feedctl.verify.query_eval import evaluate

        out = evaluate(view, sql, columns, start)
    out = out.join(view.select(ROW_ID, pl.struct(key).alias(frame.KEY), frame.TS_WALL, frame.TS_LOGICAL), on=ROW_ID)
    texts = out.select(
        key_json(out).alias("k"),
        object_json(out, frame.AFTER, json_columns).alias("a"),
        object_json(out, frame.BEFORE, json_columns).alias("b"),
        frame.TS_WALL,
        frame.TS_LOGICAL,
    )

    def norm(text: str) -> str | None:
        return None if text == "null" else canonical(json.loads(text))

    return [
        Expected(canonical(json.loads(k)), Hlc(w, lg), norm(a), norm(b) if diff else None)
        for k, a, b, w, lg in texts.iter_rows()
    ]


def widened(t: TableHistory, version: int) -> frozenset[str]:
    """The columns whose type a version after the job's start, up to `version`, widened."""
    from feedctl.source.delta import DeltaSource

    source = DeltaSource(t.name, t.location, t.storage_options)
    changed = source.schema_changes(t.start_version, version) if version > max(t.start_version, 0) else []
    return frozenset(c for v in changed for c in source.schema_change(v).retyped)


def snapshot_states(t: TableHistory, version: int, json_values: bool = False) -> dict[str, str]:
    """key -> the row as JSON, for every row of the table at `version`: the fingerprint's truth
    (`json_values`: as `expected_states`)."""
    if version < 0:
        return {}
    rows = pl.from_arrow(_second(t).rows(version))
    frame_ = rows.select(pl.struct(t.key).alias(frame.KEY), pl.struct(rows.columns).alias(frame.AFTER))
    json_columns = _second(t).variants(version) if json_values else ()
    texts = frame_.select(key_json(frame_).alias("k"), object_json(frame_, frame.AFTER, json_columns).alias("a"))
    return {canonical(json.loads(k)): canonical(json.loads(a)) for k, a in texts.iter_rows()}
