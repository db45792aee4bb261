"""`schemas.yml`: the columns and types of the project's tables, written by `feedctl schemas freeze` and
committed with the project (as SQLMesh's `external_models.yaml`), so that `compile` checks queries where the
tables cannot be opened (CI without credentials), and says when a table it can open has moved on from it."""

from __future__ import annotations

from pathlib import Path

import yaml

from feedctl.compiler.table_schema import TableSchema, read_table_schema
from feedctl.diagnostics import Diagnostic, Severity, first_line
from feedctl.project.files import Unreadable, read_text
from feedctl.project.model import Project
from feedctl.project.yaml_source import parse_yaml

FILE = "schemas.yml"
HEADER = (
    "# The columns of the project's tables, for compiling where they cannot be opened.\n"
    "# Written by `feedctl schemas freeze`; commit it, and freeze again when a table's schema changes.\n"
)


def freeze(project: Project) -> tuple[Path, list[str], list[str]]:
    """Write schemas.yml from the tables as they are: (its path, tables written, tables that could not be
    opened: their earlier entries are kept)."""
    earlier, _ = load(project)
    entries, written, unreadable = [], [], []
    for fqn, table in sorted(project.tables.items()):
        try:
            schema = read_table_schema(table.location, table.storage_options)
        except Exception as exc:  # any reason the table cannot be opened: its earlier entry stands
            unreadable.append(f"{fqn} ({first_line(exc, 200)})")
            schema = earlier.get(fqn)
            if schema is None:
                continue
        else:
            written.append(fqn)
        entries.append(
            {
                "name": fqn,
                "version": schema.version,
                "partition_columns": schema.partition_columns,
                "columns": [{"name": c, "type": schema.types.get(c)} for c in schema.columns],
            }
        )
    path = project.root / FILE
    path.write_text(HEADER + yaml.safe_dump({"tables": entries}, sort_keys=False, allow_unicode=True))
    return path, written, unreadable


def load(project: Project) -> tuple[dict[str, TableSchema], list[Diagnostic]]:
    """The frozen schemas by table, and what is wrong with the file (none when there is no file)."""
    path = project.root / FILE
    if not path.exists():
        return {}, []
    try:
        text = read_text(path)
    except Unreadable as exc:
        return {}, [Diagnostic(FILE, exc.line, exc.column, "FC002", f"cannot read file: {exc}", expected=exc.expected)]
    doc, problems = parse_yaml(text, FILE)
    if problems:
        return {}, problems
    out: dict[str, TableSchema] = {}
    tables = doc.data.get("tables") if isinstance(doc.data, dict) else None
    for i, entry in enumerate(tables if isinstance(tables, list) else [None]):
        try:
            columns = entry["columns"]
            names = [entry["name"], *(c["name"] for c in columns), *(entry.get("partition_columns") or [])]
            if not all(isinstance(n, str) for n in names):
                raise TypeError("a table's or a column's name is not a string")
            out[entry["name"]] = TableSchema(
                [c["name"] for c in columns],
                list(entry.get("partition_columns") or []),
                entry.get("version"),
                types={c["name"]: c.get("type") for c in columns},
                frozen=True,
            )
        except (TypeError, KeyError):
            at = doc.position(("tables", i) if isinstance(tables, list) else ())
            return {}, [
                Diagnostic(
                    FILE,
                    at.line,
                    at.column,
                    "FC522",
                    f"{FILE} is not as `feedctl schemas freeze` writes it",
                    expected="tables: [{name, version, partition_columns, columns: [{name, type}]}]",
                    hint="write it again with `feedctl schemas freeze`",
                )
            ]
    return out, []


def differences(frozen: TableSchema, now: TableSchema) -> list[str]:
    """How a table differs from its frozen schema: columns added, dropped, or of another type."""
    out = [f"column {c} added" for c in now.columns if c not in frozen.types]
    out += [f"column {c} dropped" for c in frozen.columns if c not in now.types]
    out += [
        f"column {c} is {_type(now.types[c])}, not {_type(frozen.types[c])}"
        for c in now.columns
        if c in frozen.types and frozen.types[c] != now.types[c]
    ]
    return out


def _type(t) -> str:
    return t if isinstance(t, str) else t.get("type", "?") if isinstance(t, dict) else str(t)


def check_against(project: Project, frozen: dict[str, TableSchema], fqn: str, now: TableSchema) -> Diagnostic | None:
    """A warning when a table compile could open differs from schemas.yml."""
    was = frozen.get(fqn)
    changed = differences(was, now) if was is not None else []
    if not changed:
        return None
    o = project.tables[fqn].origin
    return Diagnostic(
        o.file,
        o.line,
        o.column,
        "FC523",
        f"table {fqn} differs from {FILE}: {'; '.join(changed)}",
        severity=Severity.WARNING,
        hint="write it again with `feedctl schemas freeze`",
    )
