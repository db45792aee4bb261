"""Compile a project: render and check every selected feed's query, resolve its options, derive pushdown."""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from feedctl import options as feed_options
from feedctl.compiler import frozen_schemas
from feedctl.compiler.partial import PartialCompile
from feedctl.compiler.read_plan import Pushdown
from feedctl.compiler.table_schema import TableSchema, read_table_schema
from feedctl.diagnostics import Diagnostic, ProjectError, Severity, did_you_mean, first_line, json_pointer
from feedctl.options import InitialScan, Options
from feedctl.project.env_vars import SECRET_VALUES
from feedctl.project.loader import load_project
from feedctl.project.model import FeedDef, Project, SinkDef
from feedctl.project.secrets import scrub
from feedctl.project.selectors import select_feeds
from feedctl.sinks.versioned import at_version
from feedctl.source.change_source import ChangeSource
from feedctl.source.table_features import TableRefused

if TYPE_CHECKING:
    from feedctl.compiler import cdc_query


@dataclass
class CompiledFeed:
    feed: FeedDef
    tables: list[str]
    sql: str | None  # the rendered CDC query, or None for a plain feed
    options: Options  # every option, defaults filled in
    columns: dict[str, list[str] | None]  # table -> columns read (None: all)
    pushdown: dict[str, Pushdown]
    schema_checked: bool
    definition_hash: str = ""
    sink_display: dict | None = None  # its sink as the definition holds it: name, URI and options, redacted
    column_sites: dict[str, str] = field(default_factory=dict)  # a column its query names -> file:line:column
    secrets: list[str] = field(default_factory=list)  # values its query's rendering read from env_var(): never
    # kept by partial compilation, and redacted in target/compiled/


@dataclass
class CompileResult:
    project: Project
    feeds: dict[str, CompiledFeed]
    diagnostics: list[Diagnostic] = field(default_factory=list)
    table_schemas: dict[str, TableSchema | None] = field(default_factory=dict)
    vars: dict = field(default_factory=dict)

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if not d.is_error]


class _Compiler:
    def __init__(self, project: Project, vars_override: dict | None, check_tables: bool, lenient_columns: bool):
        self.project = project
        self.vars_override = vars_override
        self._renderer = None
        self.problems: list[Diagnostic] = []
        self.check_tables = check_tables
        self.lenient_columns = lenient_columns
        self.schemas: dict[str, TableSchema | None] = {}
        self.partial = PartialCompile(project, vars_override, check_tables, lenient_columns)
        self.frozen: dict[str, TableSchema] = {}
        if check_tables:
            self.frozen, problems = frozen_schemas.load(project)
            self.problems.extend(problems)

    @property
    def renderer(self):
        """Jinja with the project's macros, made on first need: a compile that renders nothing (every query
        as compiled before) needs neither it nor sqlglot. A broken macro file is said once, when it is made."""
        if self._renderer is None:
            from feedctl.compiler.render import QueryRenderer

            self._renderer = QueryRenderer(self.project, self.vars_override)
            self.problems.extend(self._renderer.problems)
        return self._renderer

    @property
    def _table_state(self) -> Severity:
        """How what a table is now (not the project) is said: under `run`, a warning, and the feed's job says
        it again when it cannot go on (the other feeds run)."""
        return Severity.WARNING if self.lenient_columns else Severity.ERROR

    def table_schema(self, fqn: str) -> TableSchema | None:
        if fqn in self.schemas:
            return self.schemas[fqn]
        table = self.project.tables[fqn]
        schema = None
        if self.check_tables:
            try:
                schema = read_table_schema(table.location, table.storage_options)
            except TableRefused as exc:
                self._refused(fqn, str(exc))
            except Exception as exc:  # any reason the table cannot be opened: its frozen columns, or say it once
                schema = self.frozen.get(fqn)
                if schema is None:
                    self._table_problem(
                        fqn,
                        "FC521",
                        f"cannot open table {fqn} ({first_line(exc, 200)}); its columns were not checked",
                        Severity.WARNING,
                        f"path: {table.location}; `feedctl schemas freeze`, where it can be opened, writes "
                        f"its columns to {frozen_schemas.FILE} for compiling without it",
                    )
            else:
                moved = frozen_schemas.check_against(self.project, self.frozen, fqn, schema)
                if moved is not None:
                    self.problems.append(moved)
                if schema.unreadable:
                    self._refused(fqn, schema.unreadable)
        if schema is not None:
            self._check_key_columns(fqn, schema)
        self.schemas[fqn] = schema
        return schema

    def _refused(self, fqn: str, why: str) -> None:
        """FC524: a table whose protocol asks for what feedctl does not read."""
        where = self.project.tables[fqn].location_display
        hint = f"path: {where}; the manual's docs/guides/following-a-table.md lists what is read"
        self._table_problem(fqn, "FC524", f"table {fqn} {why}", self._table_state, hint)

    def _table_problem(self, fqn: str, code: str, message: str, severity: Severity, hint: str) -> None:
        """A problem of a table, at its entry in project.yml."""
        o = self.project.tables[fqn].origin
        self.problems.append(Diagnostic(o.file, o.line, o.column, code, message, severity=severity, hint=hint))

    def _check_key_columns(self, fqn: str, schema: TableSchema) -> None:
        table = self.project.tables[fqn]
        known = {c.lower() for c in schema.columns}  # Spark resolves names case-insensitively
        for column in [*table.primary_key, *([table.region_column] if table.region_column else [])]:
            if column.lower() not in known:
                o = table.column_origins.get(column, table.origin)
                self.problems.append(
                    Diagnostic(
                        o.file,
                        o.line,
                        o.column,
                        "FC518",
                        f'key column "{column}" does not exist in {fqn}',
                        expected="one of " + ", ".join(schema.columns),
                        hint=did_you_mean(column, schema.columns),
                    )
                )

    def compile_feed(self, feed: FeedDef) -> CompiledFeed | None:
        compiled = self._compile_feed(feed)
        if compiled is not None:
            self._check_change_data(compiled)
        return compiled

    def _check_change_data(self, compiled: CompiledFeed) -> None:
        """A feed that follows the changes of a table read from its change data feed alone (`changes: cdf`)
        needs the feed on (as it is now)."""
        if compiled.options.initial_scan == InitialScan.ONLY:
            return
        for fqn in compiled.tables:
            schema = self.schemas.get(fqn)
            table = self.project.tables.get(fqn)
            reads_cdf = table is not None and table.changes == ChangeSource.CDF
            if reads_cdf and schema is not None and not schema.frozen and not schema.change_data_feed:
                o = compiled.feed.origin
                self.problems.append(
                    Diagnostic(
                        o.file,
                        o.line,
                        o.column,
                        "FC525",
                        f"feed {compiled.feed.name} follows the changes of {fqn}, "
                        f"whose change data feed is off (version {schema.version})",
                        severity=self._table_state,
                        expected="delta.enableChangeDataFeed=true on the table, changes: log (or auto) on "
                        "the table in project.yml, or initial_scan: only",
                        hint="with `changes: cdf`, changes are followed from the version that turns the change "
                        "data feed on; `changes: auto` reads the versions before it from the log",
                    )
                )

    def _compile_feed(self, feed: FeedDef) -> CompiledFeed | None:
        sink = self.project.sinks.get(feed.sink) if feed.sink else None
        sink_kind = sink.kind if sink else "sinkless"
        defaults = {"range_distribution_strategy": self.project.settings.get("default_range_distribution_strategy")}
        options = feed_options.resolve({**defaults, **feed.options}, sink_kind, has_query=bool(feed.query_file))
        if not feed.query_file:
            schemas = {t: self.table_schema(t) for t in feed.tables}
            return CompiledFeed(
                feed,
                list(feed.tables),
                None,
                options,
                columns={t: None for t in feed.tables},
                pushdown={t: Pushdown(columns=None) for t in feed.tables},
                schema_checked=all(s is not None for s in schemas.values()),
            )
        key = self.partial.key(feed, options)
        kept = self.partial.get(feed, key, self.table_schema)
        if kept is None:
            before = len(self.problems)
            compiled = self._compile_query(feed, options)
            said = [d for d in self.problems[before:] if d.code != "FC521"]  # a table out of reach: not the query's
            if compiled is None or said or compiled.secrets:
                return compiled
            table = compiled.tables[0]
            kept = (
                table,
                compiled.sql,
                compiled.columns,
                compiled.pushdown,
                compiled.column_sites,
                compiled.schema_checked,
            )
            self.partial.put(feed, key, kept, self.schemas.get(table))
        table, sql, columns, pd, sites, checked = kept
        return CompiledFeed(
            feed, [table], sql, options, columns=columns, pushdown=pd, schema_checked=checked, column_sites=sites
        )

    def _compile_query(self, feed: FeedDef, options: Options) -> CompiledFeed | None:
        from feedctl.compiler import cdc_query, pushdown

        rendered = self.renderer.render(feed.query_file)
        if self.renderer.problems:  # a broken macro file: its macros are undefined everywhere, said once
            rendered.problems = [d for d in rendered.problems if d.code != "FC402"]
        self.problems.extend(rendered.problems)
        if rendered.sql is None:
            return None
        analysis = cdc_query.analyze(rendered.sql)
        locate = _SqlLocator(self.project.root / feed.query_file, rendered.sql, feed)
        problems = list(analysis.problems)
        table = analysis.table
        if table and table not in self.project.tables:
            if not any(p.code == "FC507" for p in problems):  # FROM a CTE's name: FC507 says what is wrong
                problems.append(
                    cdc_query.QueryProblem(
                        "FC519",
                        f'"{table}" is not a source table',
                        snippet=table.split(".")[-1],
                        expected="FROM {{ source('<source>', '<table>') }} naming a table declared in project.yml",
                        hint=did_you_mean(table, self.project.tables),
                    )
                )
            table = None
        schema = self.table_schema(table) if table else None
        # A query reading other relations too (a join, a sub-select) is refused for that: its columns are
        # not checked against the one table, which would only add errors for the others' columns.
        others = any(p.code in _OTHER_RELATIONS for p in analysis.problems)
        if schema is not None and analysis.tree is not None and not others:
            unknown = cdc_query.check_columns(analysis, schema.columns)
            if self.lenient_columns:
                self.problems.extend(replace(locate.diagnostic(p), severity=Severity.WARNING) for p in unknown)
            else:
                problems.extend(unknown)
        self.problems.extend(locate.diagnostic(p) for p in problems)
        if problems or table is None:
            return None
        spec = self.project.tables[table]
        extra = [spec.region_column] if spec.region_column else []
        pd = pushdown.derive(
            analysis,
            schema.columns if schema else None,
            spec.primary_key,
            schema.partition_columns if schema else [],
            extra,
            diff=options.diff,
        )
        sites = {}
        for named in cdc_query.check_columns(analysis, []):  # every column the query names, where it is first
            name = named.snippet.lower()
            if name not in sites:
                sites[name] = locate.site(name)
        return CompiledFeed(
            feed,
            [table],
            rendered.sql.strip() + "\n",
            options,
            columns={table: pd.columns},
            pushdown={table: pd},
            schema_checked=schema is not None,
            column_sites=sites,
            secrets=rendered.secrets,
        )


_CHAR_ALIGNMENT = 4_000_000  # rendering × template characters aligned one by one (the cost grows as their product)


def _alignment(sql: str, template: str) -> list[tuple]:
    """difflib's opcodes from the rendered SQL to the template: character by character, or, for texts too
    long for that, line by line (a position then maps to the start of its block of lines)."""
    if len(sql) * len(template) <= _CHAR_ALIGNMENT:
        return difflib.SequenceMatcher(None, sql, template, autojunk=False).get_opcodes()
    lines_sql, lines_template = sql.splitlines(keepends=True), template.splitlines(keepends=True)
    starts_sql = [0, *itertools.accumulate(len(x) for x in lines_sql)]
    starts_template = [0, *itertools.accumulate(len(x) for x in lines_template)]
    return [
        (tag, starts_sql[i1], starts_sql[i2], starts_template[j1], starts_template[j2])
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(
            None, lines_sql, lines_template, autojunk=False
        ).get_opcodes()
    ]


class _SqlLocator:
    """Maps a position in the rendered SQL back to the query file the user wrote.

    The template and its rendering are aligned character by character (difflib): text the user wrote maps
    to where it is in the file, text a Jinja expression produced maps to that expression."""

    def __init__(self, path: Path, sql: str, feed: FeedDef):
        self.file = feed.query_file
        self.template = path.read_text(encoding="utf-8")
        self.sql = sql
        self.feed = feed
        self._opcodes = None
        self._words: str | None = None

    def _template_offset(self, offset: int) -> int | None:
        if self.template == self.sql:
            return offset
        if self._opcodes is None:
            self._opcodes = _alignment(self.sql, self.template)
        for tag, i1, i2, j1, _ in self._opcodes:
            if i1 <= offset < i2:
                return j1 + (offset - i1) if tag == "equal" else j1
        return None

    def site(self, name: str) -> str:
        """`file:line:column` of the first word `name` in the query file (its first use, unless a macro
        writes it); the file alone when only a macro does. Cheaper than aligning the rendering: every
        column of every query is given one, and an error rarely needs it."""
        if self._words is None:  # the file as the user wrote it, its Jinja blanked (a source() call names no column)
            self._words = _JINJA.sub(lambda m: " " * len(m.group()), self.template)
        found = re.search(rf"(?<![\w.]){re.escape(name)}\b", self._words, re.IGNORECASE)
        if found is None:
            return self.file
        line, column = _line_col(self.template, found.start())
        return f"{self.file}:{line}:{column}"

    def diagnostic(self, problem: cdc_query.QueryProblem) -> Diagnostic:
        line, col = 1, 1
        compiled = 0  # line in the rendered SQL
        at = None
        if problem.offset is not None:
            line, col = _line_col(self.sql, problem.offset)
            compiled = line
            at = self._template_offset(problem.offset)
        elif problem.snippet:
            found = self.template.lower().find(problem.snippet.lower())
            at = found if found >= 0 else None
        if at is not None:
            line, col = _line_col(self.template, at)
        hint = problem.hint
        if compiled and self.template != self.sql:
            rendered_line = self.sql.split("\n")[compiled - 1].strip()
            hint = (hint + "; " if hint else "") + f"rendered line {compiled}: {rendered_line[:120]}"
        return Diagnostic(self.file, line, col, problem.code, problem.message, expected=problem.expected, hint=hint)


_JINJA = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", re.DOTALL)


def _line_col(text: str, offset: int) -> tuple[int, int]:
    before = text[:offset]
    return before.count("\n") + 1, offset - (before.rfind("\n") + 1) + 1


_OTHER_RELATIONS = ("FC504", "FC505", "FC506", "FC507", "FC508")  # not one table, join, sub-select, CTE, UNION


def sink_display(sink: SinkDef) -> dict:
    """A sink as a feed's definition holds it: name, URI and options, redacted."""
    return {"name": sink.name, "uri": sink.uri_display, "options": sink.options_display}


def definition_hash(compiled: CompiledFeed, job_options: Options | None = None, job_tables=None) -> str:
    """What identifies a feed's output: its query (or, without one, that it has none), options and sink
    (secrets redacted). Not part of it, since a job takes them in place: descriptions, tags and meta; the
    options of a job's start (`START_OPTIONS`) and those a job changes (`IN_PLACE_OPTIONS`); and a plain
    feed's tables, which a job adds and drops. `job_options`, `job_tables`: a job's, whose values of those are
    put back, as in the hashes of jobs made before that was so. Hashed as stored (`Options.to_json`), so that
    the hash stays that of every job made since."""
    kept = (*feed_options.START_OPTIONS, *feed_options.IN_PLACE_OPTIONS)
    options = {k: v for k, v in compiled.options.to_json().items() if k not in kept}
    tables = compiled.tables if compiled.sql is not None else None
    if job_options is not None:
        stored = job_options.to_json()
        options.update({k: stored[k] for k in kept})
        tables = list(job_tables)
    body = {"tables": tables, "sql": compiled.sql, "options": options, "sink": compiled.sink_display}
    return "sha256:" + hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()


def _has_errors(feed: FeedDef, errors: list[Diagnostic]) -> bool:
    """Whether the feed's own definition has an error: compiling it would only repeat that error."""
    prefix = json_pointer(feed.json_path)
    return any(
        d.file == feed.origin.file and (d.json_path == prefix or d.json_path.startswith((prefix + ".", prefix + "[")))
        for d in errors
    )


def compile_project(
    project_dir: str | Path,
    selectors: list[str] | None = None,
    vars_override: dict | None = None,
    check_tables: bool = True,
    lenient_columns: bool = False,
    keep: bool = False,
) -> CompileResult:
    """Load, validate and compile; raises ProjectError with every diagnostic when any is an error. With
    `lenient_columns`, a query naming a column its table no longer has is warned of (FC518), not refused:
    `run` lets the feed's job go on up to the change that dropped it; so is a table feedctl cannot read (FC524)
    or whose changes it cannot follow (FC525), which the feed's job refuses, not the other feeds. Queries compiled
    before are reused
    (`compiler/partial.py`); with `keep` (`feedctl compile`, which writes target/ anyway), what this compile did
    is kept for the next. `state:` selectors are taken by `compiler/state.py`, around this."""
    project, loaded = load_project(project_dir, strict=False)
    compiler = _Compiler(project, vars_override, check_tables, lenient_columns)
    names, select_problems = select_feeds(
        project, selectors or [], lambda feed: compiler.renderer.render(feed.query_file).sources
    )
    compiler.problems.extend(loaded)
    compiler.problems.extend(select_problems)
    # Queries are compiled even when feed or sink files have errors, so one run reports everything; not
    # when project.yml itself is broken, since every source() would then fail for the same reason.
    if any(d.is_error and d.file == "project.yml" for d in loaded):
        names = []
    feeds = {}
    errors = [d for d in loaded if d.is_error]
    for name in names:
        if _has_errors(project.feeds[name], errors):
            continue
        compiled = compiler.compile_feed(project.feeds[name])
        if compiled is not None:
            sink = project.sinks.get(compiled.feed.sink) if compiled.feed.sink else None
            sink = at_version(sink, compiled.feed.version) if sink else None  # a later version's own location
            compiled.sink_display = sink_display(sink) if sink else None
            compiled.definition_hash = definition_hash(compiled)
            feeds[name] = compiled
    if not compiler.partial.hits:
        _ = compiler.renderer  # made for its macro files' problems: no query compiled before vouches for them
    if keep and not any(d.code == "FC406" for d in compiler.problems):  # kept only under sound macro files
        compiler.partial.save()
    problems = scrub(compiler.problems, SECRET_VALUES)
    if any(d.is_error for d in problems):
        raise ProjectError(problems)
    return CompileResult(
        project, feeds, sorted(problems), compiler.schemas, {**project.vars_display, **(vars_override or {})}
    )
