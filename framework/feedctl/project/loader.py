"""Load a project directory: read every file, validate it, build the model, report every problem at once."""

from __future__ import annotations

from pathlib import Path

from jinja2 import TemplateError, UndefinedError
from jinja2.exceptions import SecurityError

from feedctl.diagnostics import Diagnostic, ProjectError, did_you_mean, json_pointer
from feedctl.project import references, schema_check
from feedctl.project.env_vars import SECRET_VALUES, EnvVarUnset, is_template, render_value
from feedctl.project.files import Unreadable, read_text
from feedctl.project.model import FeedDef, Origin, Project, SinkDef, TableDef
from feedctl.project.secrets import SECRET_PLACES, redact_mapping, redact_uri, scrub, secret_allowed
from feedctl.project.yaml_source import YamlDocument, parse_yaml
from feedctl.sinks.registry import kind_of, scheme_of
from feedctl.spark.place import DEFAULT_MASTER, SparkPlace, redact_remote

DEFAULT_STATE = "sqlite:///target/state.db"
DEFAULT_STAGING = "target/stage"
_DEFINES = {"project": "table", "sinks": "sink", "feeds": "feed"}  # kind of file -> what it defines


def find_files(root: Path, folder: str, suffixes: tuple[str, ...]) -> list[Path]:
    base = root / folder
    if not base.is_dir():
        return []
    return sorted(p for p in base.rglob("*") if p.is_file() and p.suffix in suffixes)


class _Reader:
    """Parses, renders and validates files, collecting diagnostics instead of stopping at the first."""

    def __init__(self, root: Path):
        self.root = root
        self.problems: list[Diagnostic] = []
        self.redacted: dict[tuple[str, tuple], str] = {}  # (file, path) -> value with secrets hidden
        self.unrendered: set[tuple[str, str]] = set()  # (file, JSON path) of values whose template failed
        # Kinds of definition ("table", "sink") not all read, for a broken file or entry: a reference to an
        # unknown name of that kind may name one of them, so it is not reported (that would be a second error).
        self.incomplete: set[str] = set()

    def rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def read(self, path: Path, kind: str) -> YamlDocument | None:
        file = self.rel(path)
        try:
            text = read_text(path)
        except Unreadable as exc:
            self.problems.append(
                Diagnostic(file, exc.line, exc.column, "FC002", f"cannot read file: {exc}", expected=exc.expected)
            )
            self.incomplete.add(_DEFINES[kind])
            return None
        doc, problems = parse_yaml(text, file)
        self.problems.extend(problems)
        if doc is None:
            self.incomplete.add(_DEFINES[kind])
            return None
        if doc.data is None:
            self.problems.append(Diagnostic(file, 1, 1, "FC005", "the file is empty", expected=f"a {kind} document"))
            return None
        doc.kind = kind
        self._render(doc, doc.data, ())
        # A value whose template failed was reported already; its placeholder is not checked again.
        self.problems.extend(d for d in schema_check.check(doc, kind) if (file, d.json_path) not in self.unrendered)
        return doc

    def _render(self, doc: YamlDocument, value, path: tuple):
        """Render `{{ env_var(...) }}` in string values in place; remember a redacted copy."""
        if isinstance(value, dict):
            for key, child in value.items():
                if is_template(child):
                    value[key] = self._render_one(doc, child, path + (key,))
                else:
                    self._render(doc, child, path + (key,))
        elif isinstance(value, list):
            for i, child in enumerate(value):
                if is_template(child):
                    value[i] = self._render_one(doc, child, path + (i,))
                else:
                    self._render(doc, child, path + (i,))

    def _render_one(self, doc: YamlDocument, text: str, path: tuple) -> str:
        pos = doc.position(path)
        try:
            rendered = render_value(text)
        except EnvVarUnset as exc:
            problem = Diagnostic(
                doc.file,
                pos.line,
                pos.column,
                "FC403",
                f'environment variable "{exc.name}" is not set and env_var() has no default',
                json_path=json_pointer(path),
                expected=f"{exc.name} set, or env_var('{exc.name}', 'default')",
            )
        except SecurityError as exc:  # TemplateRefused, or an unsafe attribute
            problem = Diagnostic(
                doc.file,
                pos.line,
                pos.column,
                "FC407",
                f"refused by the template sandbox: {exc}",
                json_path=json_pointer(path),
                expected="a value that uses env_var() alone",
            )
        except TemplateError as exc:
            name = str(exc).split("'")[1] if isinstance(exc, UndefinedError) and "'" in str(exc) else ""
            problem = Diagnostic(
                doc.file,
                pos.line,
                pos.column,
                "FC401",
                f"template error: {exc}",
                json_path=json_pointer(path),
                hint=did_you_mean(name, ["env_var"]) if name else "",
            )
        except (ArithmeticError, LookupError, TypeError, ValueError, RecursionError) as exc:  # `{{ 1/0 }}`
            problem = Diagnostic(
                doc.file,
                pos.line,
                pos.column,
                "FC401",
                f"template error: {type(exc).__name__}: {exc}",
                json_path=json_pointer(path),
                expected="a value that uses env_var() alone",
            )
        else:
            shown = render_value(text, redact=True)
            if shown == rendered or secret_allowed(doc.kind, path):
                self.redacted[(doc.file, path)] = shown
                return rendered
            problem = Diagnostic(
                doc.file,
                pos.line,
                pos.column,
                "FC110",
                "env_var() here would be written in clear (to target/manifest.json, the docs and "
                "`feedctl ls`): its values are secrets, shown as ****",
                json_path=json_pointer(path),
                expected=SECRET_PLACES,
                hint="a value of a CDC query that differs between environments goes through var() and --vars; "
                "YAML values know only env_var()",
            )
        self.problems.append(problem)
        self.unrendered.add((doc.file, problem.json_path))
        return ""

    def display(self, doc: YamlDocument | None, path: tuple, value):
        """`value` as it may be shown: each string that env_var() rendered, redacted (within lists and
        mappings too)."""
        if doc is None:
            return value
        if isinstance(value, dict):
            return {k: self.display(doc, path + (k,), v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.display(doc, path + (i,), v) for i, v in enumerate(value)]
        return self.redacted.get((doc.file, path), value)

    def origin(self, doc: YamlDocument, path: tuple) -> Origin:
        pos = doc.position(path)
        return Origin(doc.file, pos.line, pos.column)


def load_project(project_dir: str | Path, strict: bool = True) -> tuple[Project, list[Diagnostic]]:
    """Load and check a project, returning it with its diagnostics. When `strict`, raises ProjectError
    with every diagnostic if any is an error; otherwise the caller goes on and reports them later."""
    root = Path(project_dir).resolve()
    if not (root / "project.yml").is_file():
        raise ProjectError(
            [
                Diagnostic(
                    str(root / "project.yml"),
                    0,
                    0,
                    "FC001",
                    f"no project.yml in {root}",
                    hint="run feedctl in a project directory, pass --project-dir, "
                    "or create one with `feedctl init DIR`",
                )
            ]
        )
    reader = _Reader(root)
    if (root / "target").exists() and not (root / "target").is_dir():
        reader.problems.append(
            Diagnostic(
                "target",
                0,
                0,
                "FC002",
                "target is not a folder",
                expected="target/ a folder, or none: feedctl writes its manifest, "
                "compiled queries and local state there",
            )
        )
    project_doc = reader.read(root / "project.yml", "project")
    project = _build_project(root, project_doc, reader)
    docs = {"project": [project_doc] if project_doc else []}
    for folder, kind in (("sinks", "sinks"), ("feeds", "feeds")):
        docs[kind] = [d for p in find_files(root, folder, (".yml", ".yaml")) if (d := reader.read(p, kind))]
    for doc in docs["sinks"]:
        _build_sinks(project, doc, reader)
    for doc in docs["feeds"]:
        _build_feeds(project, doc, reader)
    project.macro_files = [reader.rel(p) for p in find_files(root, "macros", (".sql",))]
    reader.problems.extend(references.check(project, docs, incomplete=reader.incomplete))
    problems = scrub(reader.problems, SECRET_VALUES)
    if strict and any(d.is_error for d in problems):
        raise ProjectError(problems)
    return project, sorted(problems)


def _named(container, key: str, reader: _Reader, kind: str) -> list[tuple[int, dict]]:
    """(index, item) for each mapping with a string name in `container[key]`; malformed ones were reported,
    and make `kind` incomplete."""
    items = container.get(key) if isinstance(container, dict) else None
    if items is not None and not isinstance(items, list):
        reader.incomplete.add(kind)
    named = []
    for i, item in enumerate(items if isinstance(items, list) else []):
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            named.append((i, item))
        else:
            reader.incomplete.add(kind)
    return named


def _build_project(root: Path, doc: YamlDocument | None, reader: _Reader) -> Project:
    data = doc.data if doc and isinstance(doc.data, dict) else {}
    spark = _mapping(data.get("spark"))
    state = data.get("state") if isinstance(data.get("state"), str) else DEFAULT_STATE
    staging = data.get("staging") if isinstance(data.get("staging"), str) else DEFAULT_STAGING
    project = Project(
        root=root,
        name=str(data.get("name", root.name)),
        description=str(data.get("description", "")),
        state_url=state,
        state_url_display=redact_uri(reader.display(doc, ("state",), state)) if doc else state,
        spark=SparkPlace(
            str(spark.get("master", DEFAULT_MASTER)),
            {str(k): str(v) for k, v in _mapping(spark.get("conf")).items()},
            str(spark.get("remote") or ""),
        ),
        vars=dict(_mapping(data.get("vars"))),
        settings=dict(_mapping(data.get("settings"))),
        metrics=dict(_mapping(data.get("metrics"))),
        staging=staging,
        staging_location=_table_location(root, staging),
    )
    project.vars_display = {k: reader.display(doc, ("vars", k), v) for k, v in project.vars.items()}
    project.spark_master_display = redact_uri(str(reader.display(doc, ("spark", "master"), project.spark.master)))
    project.spark_remote_display = redact_remote(str(reader.display(doc, ("spark", "remote"), project.spark.remote)))
    # Spark settings often carry credentials (spark.hadoop.fs.s3a.secret.key): secret-looking names hidden too.
    project.spark_conf_display = redact_mapping(
        {k: str(reader.display(doc, ("spark", "conf", k), v)) for k, v in project.spark.conf.items()}
    )
    for si, source in _named(data, "sources", reader, "table"):
        source_options = _mapping(source.get("storage_options"))
        source_display = {
            k: reader.display(doc, ("sources", si, "storage_options", k), v) for k, v in source_options.items()
        }
        for ti, table in _named(source, "tables", reader, "table"):
            path = ("sources", si, "tables", ti)
            # A table with a malformed path or key is registered all the same (the schema errors stop the
            # compile), so that feeds naming it are not told it does not exist.
            table_path = table["path"] if isinstance(table.get("path"), str) else ""
            path_display = redact_uri(reader.display(doc, path + ("path",), table_path))
            key = table["primary_key"] if isinstance(table.get("primary_key"), list) else []
            references.register(
                project.tables,
                TableDef(
                    source=source["name"],
                    name=table["name"],
                    path=table_path,
                    location=_table_location(root, table_path),
                    path_display=path_display,
                    location_display=_table_location(root, path_display),
                    primary_key=[str(c) for c in key],
                    origin=reader.origin(doc, path + ("name",)),
                    json_path=path,
                    column_origins={
                        **{str(c): reader.origin(doc, path + ("primary_key", i)) for i, c in enumerate(key)},
                        **(
                            {str(table["region_column"]): reader.origin(doc, path + ("region_column",))}
                            if table.get("region_column")
                            else {}
                        ),
                    },
                    description=str(table.get("description", "")),
                    locality=table.get("locality"),
                    region_column=table.get("region_column"),
                    spans=table.get("spans"),
                    changes=table.get("changes") or "auto",
                    storage_options={**source_options, **_mapping(table.get("storage_options"))},
                    storage_options_display={
                        **source_display,
                        **{
                            k: reader.display(doc, path + ("storage_options", k), v)
                            for k, v in _mapping(table.get("storage_options")).items()
                        },
                    },
                ),
                "table",
                reader.problems,
            )
    return project


def _mapping(value) -> dict:
    """A mapping the schema may yet refuse (a list where a mapping belongs): read as none meanwhile."""
    return value if isinstance(value, dict) else {}


def _table_location(root: Path, path: str) -> str:
    if "://" in path and not path.startswith("file://"):
        return path
    local = Path(path.removeprefix("file://"))
    return str(local if local.is_absolute() else root / local)


def _build_sinks(project: Project, doc: YamlDocument, reader: _Reader) -> None:
    for i, item in _named(doc.data, "sinks", reader, "sink"):
        uri = item.get("uri") if isinstance(item.get("uri"), str) else ""
        options = item.get("options") if isinstance(item.get("options"), dict) else {}
        options_display = {k: reader.display(doc, ("sinks", i, "options", k), v) for k, v in options.items()}
        sink = SinkDef(
            name=item["name"],
            uri=uri,
            uri_display=redact_uri(reader.display(doc, ("sinks", i, "uri"), uri)),
            kind=kind_of(uri).name if kind_of(uri) else None,
            scheme=scheme_of(uri),
            options=options,
            options_display=redact_mapping(options_display),
            origin=reader.origin(doc, ("sinks", i, "name")),
            json_path=("sinks", i),
            description=str(item.get("description", "")),
        )
        references.register(project.sinks, sink, "sink", reader.problems)


def _build_feeds(project: Project, doc: YamlDocument, reader: _Reader) -> None:
    for i, item in _named(doc.data, "feeds", reader, "feed"):
        query = item.get("query")
        query_file = None
        if isinstance(query, str):
            query_file = (Path(doc.file).parent / query).as_posix()
        feed = FeedDef(
            name=item["name"],
            origin=reader.origin(doc, ("feeds", i, "name")),
            json_path=("feeds", i),
            description=str(item.get("description", "")),
            tags=[t for t in item.get("tags") or [] if isinstance(t, str)]
            if isinstance(item.get("tags"), list)
            else [],
            query_file=query_file,
            tables=[t for t in item["tables"] if isinstance(t, str)] if isinstance(item.get("tables"), list) else [],
            sink=item.get("sink") if isinstance(item.get("sink"), str) else None,
            options=item.get("options") if isinstance(item.get("options"), dict) else {},
            meta=item.get("meta") if isinstance(item.get("meta"), dict) else {},
            contract_enforced=isinstance(item.get("contract"), dict) and item["contract"].get("enforced") is True,
            version=item["version"] if isinstance(item.get("version"), int) and item["version"] >= 1 else 1,
            options_valid=not any(
                d.json_path.startswith(f"$.feeds[{i}].options") and d.file == doc.file for d in reader.problems
            ),
        )
        references.register(project.feeds, feed, "feed", reader.problems)
