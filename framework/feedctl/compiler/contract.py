"""A feed's output contract: what its messages carry (format, envelope, and per table its key and fields with
their Delta types), derived at compile into `target/contracts/<feed>.json` with the JSON Schema of its
messages as JSON carries them, for consumers; and how a change of it is judged, breaking or not.

Breaking, for a consumer of the messages: a field removed or renamed, a field's type changed (narrowed or
widened), the key changed, the format or envelope changed, a part of the message no longer sent (`before`,
`updated`...), a table no longer emitted. Not breaking: a field, a part or a table added.

A CDC query's field takes the type of the column it names (`amount`, `cdc_prev.status`); an expression's
type is not derived (any value), so a change of it is not seen.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from feedctl.compiler.cdc_query import DIALECT, PREV
from feedctl.compiler.query_names import table_qualifiers, unqualified
from feedctl.options import Envelope, Options
from feedctl.sinks.naming import topic_name

Fields = tuple[tuple[str, object], ...]  # (name, Delta type: a name, a nested type's JSON, or None: not derived)


@dataclass(frozen=True)
class Contract:
    feed: str
    version: int
    format: str
    envelope: str
    parts: tuple[str, ...]  # what a message carries beside the row: updated, before, mvcc_timestamp, topic
    keys: dict[str, Fields]  # table -> its key's fields
    fields: dict[str, Fields]  # table -> the row's fields
    # Where this version's messages are, for its consumers: the sink's URI (redacted) and each table's topic.
    # Not part of what a change is judged by: a new version has a place of its own.
    location: dict | None = None

    def to_json(self) -> dict:
        return {
            "feed": self.feed,
            "version": self.version,
            "format": self.format,
            "envelope": self.envelope,
            "parts": list(self.parts),
            "tables": {t: {"key": dict(self.keys[t]), "fields": dict(self.fields[t])} for t in sorted(self.fields)},
            **({"location": self.location} if self.location is not None else {}),
            "json_schema": self.json_schema(),
        }

    @classmethod
    def from_json(cls, data: dict) -> Contract:
        tables = data["tables"]
        return cls(
            data["feed"],
            int(data["version"]),
            data["format"],
            data["envelope"],
            tuple(data["parts"]),
            {t: tuple(v["key"].items()) for t, v in tables.items()},
            {t: tuple(v["fields"].items()) for t, v in tables.items()},
        )

    def json_schema(self) -> dict:
        """The JSON Schema of one message (of any of the feed's tables), as JSON carries it."""
        one = [self._message(t) for t in sorted(self.fields)]
        return {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": f"feed {self.feed}, version {self.version}",
            **(one[0] if len(one) == 1 else {"oneOf": one}),
        }

    def _message(self, table: str) -> dict:
        row = {"type": "object", "properties": {n: _json_type(t) for n, t in self.fields[table]}}
        key = {"type": "array", "prefixItems": [_json_type(t) for _, t in self.keys[table]]}
        if self.envelope == Envelope.KEY_ONLY.value:
            return key
        if self.envelope == Envelope.ROW.value:
            return row
        if self.envelope == Envelope.BARE.value:  # what a wrapped message carries beside the row, in `__crdb__`
            if self.parts:
                extra = {p: {"type": "string"} for p in self.parts if p != "before"}
                row["properties"]["__crdb__"] = {"type": "object", "properties": extra}
            return row
        properties = {"key": key, "after": {"oneOf": [{"type": "null"}, row]}}
        for part in self.parts:
            properties[part] = {"oneOf": [{"type": "null"}, row]} if part == "before" else {"type": "string"}
        return {"type": "object", "properties": properties, "required": list(properties)}


def derive(
    feed: str,
    version: int,
    options: Options,
    tables: list[str],
    sql: str | None,
    keys: dict,
    types: dict,
    location: dict | None = None,
) -> Contract:
    """The contract of a feed emitting `tables` (each's key columns in `keys`, column -> Delta type in
    `types`) with `options`, through its CDC query `sql` if it has one."""
    parts = tuple(
        name
        for name, on in (
            ("updated", options.updated),
            ("before", options.diff),
            ("mvcc_timestamp", options.mvcc_timestamp),
            ("topic", options.topic_in_value),
        )
        if on
    )
    fields = {}
    for table in tables:
        columns = types.get(table) or {}
        fields[table] = tuple(columns.items()) if sql is None else _projected(sql, columns)
    return Contract(
        feed,
        version,
        options.format.value,
        options.envelope.value,
        parts,
        {t: tuple((c, (types.get(t) or {}).get(c)) for c in keys.get(t, [])) for t in tables},
        fields,
        location,
    )


def of_feed(compiled, result) -> Contract:
    """The contract of a compiled feed (`CompiledFeed`) of a compile's `CompileResult`, with where its version's
    messages are."""
    project = result.project
    schemas = {t: result.table_schemas.get(t) for t in compiled.tables}
    sink = compiled.sink_display
    location = (
        {
            "uri": sink["uri"],
            "topics": {
                t: topic_name(t, compiled.options.full_table_name, sink["uri"], sink["options"])
                for t in compiled.tables
            },
        }
        if sink is not None
        else None
    )
    return derive(
        compiled.feed.name,
        compiled.feed.version,
        compiled.options,
        compiled.tables,
        compiled.sql,
        {t: project.tables[t].primary_key for t in compiled.tables if t in project.tables},
        {t: {c: s.types.get(c) for c in s.columns} for t, s in schemas.items() if s is not None},
        location,
    )


def _projected(sql: str, columns: dict) -> Fields:
    select = sqlglot.parse_one(sql, read=DIALECT)
    while isinstance(select, exp.Subquery):
        select = select.this
    select = unqualified(select.copy(), table_qualifiers(select))
    out = []
    for item in select.expressions:
        target = item.this if isinstance(item, exp.Alias) else item
        if isinstance(target, exp.Star) or isinstance(target, exp.Column) and isinstance(target.this, exp.Star):
            out.extend(columns.items())
            continue
        name = item.alias if isinstance(item, exp.Alias) else item.name if isinstance(item, exp.Column) else item.sql()
        out.append((name, _type_of(target, columns)))
    return tuple(out)


def _type_of(node: exp.Expression, columns: dict):
    if isinstance(node, exp.Column):
        parts = [p.name for p in node.parts]
        name = parts[1] if parts[0] == PREV and len(parts) == 2 else parts[0] if len(parts) == 1 else None
        return columns.get(name)
    if isinstance(node, exp.Anonymous) and str(node.name).lower() == "event_op":
        return "string"
    return None


def judge(before: Contract, after: Contract) -> tuple[list[str], list[str]]:
    """(breaking changes, other changes) from `before` to `after`."""
    breaking, other = [], []
    for what in ("format", "envelope"):
        was, now = getattr(before, what), getattr(after, what)
        if was != now:
            breaking.append(f"{what}: {was} → {now}")
    breaking += [f"{p} no longer in the messages" for p in before.parts if p not in after.parts]
    other += [f"{p} added to the messages" for p in after.parts if p not in before.parts]
    breaking += [f"{t} no longer emitted" for t in before.fields if t not in after.fields]
    other += [f"{t} emitted" for t in after.fields if t not in before.fields]
    for table in (t for t in after.fields if t in before.fields):
        if [n for n, _ in before.keys[table]] != [n for n, _ in after.keys[table]]:
            breaking.append(
                f"{table} key: ({', '.join(n for n, _ in before.keys[table])}) → "
                f"({', '.join(n for n, _ in after.keys[table])})"
            )
        was, now = dict(before.fields[table]), dict(after.fields[table])
        breaking += [f"{table}: field {n} removed" for n in was if n not in now]
        breaking += [
            f"{table}: field {n} {_text(was[n])} → {_text(now[n])}"
            for n in was
            if n in now and _text(was[n]) != _text(now[n])
        ]
        other += [f"{table}: field {n} added" for n in now if n not in was]
    return breaking, other


def _text(delta_type) -> str:
    if delta_type is None:
        return "(any)"
    return delta_type if isinstance(delta_type, str) else json.dumps(delta_type, sort_keys=True)


_SCALARS = {
    "byte": {"type": "integer"},
    "short": {"type": "integer"},
    "integer": {"type": "integer"},
    "long": {"type": "integer"},
    "float": {"type": "number"},
    "double": {"type": "number"},
    "boolean": {"type": "boolean"},
    "string": {"type": "string"},
    "binary": {"type": "string", "contentEncoding": "base64"},
    "date": {"type": "string", "format": "date"},
    "timestamp": {"type": "string", "format": "date-time"},
    "timestamp_ntz": {"type": "string"},
}


def _json_type(delta_type) -> dict:
    """A value of `delta_type` as a message's JSON carries it (null allowed), and its Delta type."""
    if delta_type is None:
        return {}
    if isinstance(delta_type, str):
        base = _SCALARS.get(delta_type, {"type": "string"})  # decimals, and what else is text
    elif delta_type.get("type") == "struct":
        base = {"type": "object", "properties": {f["name"]: _json_type(f["type"]) for f in delta_type["fields"]}}
    elif delta_type.get("type") == "array":
        base = {"type": "array", "items": _json_type(delta_type["elementType"])}
    else:  # a map: an object keyed by its keys' text
        base = {"type": "object", "additionalProperties": _json_type(delta_type.get("valueType"))}
    return {"oneOf": [{"type": "null"}, base], "x-delta-type": _text(delta_type)}
