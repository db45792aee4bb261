"""Checks across files: unique names, feed → sink and feed → table references, sink schemes and options."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from feedctl import options as feed_options
from feedctl.diagnostics import Diagnostic, Severity, did_you_mean, json_pointer
from feedctl.project.model import Project
from feedctl.project.yaml_source import YamlDocument
from feedctl.sinks.registry import SCHEMES, option_kinds
from feedctl.units import parse_duration

# Sink options and the kinds of sink each applies to, as each sink declares them.
SINK_OPTION_KINDS = option_kinds()


class Locator:
    """Positions of keys inside the definitions, for diagnostics that point at the exact value."""

    def __init__(self, docs: dict[str, list[YamlDocument]]):
        self.by_file = {d.file: d for ds in docs.values() for d in ds}

    def diag(self, obj, sub: tuple, code: str, message: str, severity=Severity.ERROR, **kw) -> Diagnostic:
        path = tuple(obj.json_path) + tuple(sub)
        doc = self.by_file.get(obj.origin.file)
        pos = doc.position(path) if doc else obj.origin
        return Diagnostic(
            obj.origin.file, pos.line, pos.column, code, message, severity=severity, json_path=json_pointer(path), **kw
        )

    def has_key(self, obj, key: str) -> bool:
        """Whether the definition wrote `key`, whatever its value."""
        doc = self.by_file.get(obj.origin.file)
        return bool(doc) and tuple(obj.json_path) + (key,) in doc.keys


def register(registry: dict, obj, kind: str, problems: list[Diagnostic]) -> bool:
    """Add a definition by name; a second definition of the name is an error pointing at both."""
    key = getattr(obj, "fqn", obj.name)
    if key in registry:
        first = registry[key].origin
        problems.append(
            Diagnostic(
                obj.origin.file,
                obj.origin.line,
                obj.origin.column,
                "FC201",
                f'{kind} "{key}" is defined twice',
                json_path=json_pointer(tuple(obj.json_path) + ("name",)),
                hint=f"first defined at {first.file}:{first.line}",
                related=(f"{first.file}:{first.line}",),
            )
        )
        return False
    registry[key] = obj
    return True


def check(project: Project, docs: dict[str, list[YamlDocument]], incomplete=frozenset()) -> list[Diagnostic]:
    """`incomplete`: kinds of definition ("table", "sink") of which some could not be read (already reported);
    references to unknown names of those kinds are not reported."""
    loc = Locator(docs)
    out: list[Diagnostic] = []
    for table in project.tables.values():
        if table.region_column and table.primary_key and table.region_column not in table.primary_key:
            out.append(
                loc.diag(
                    table,
                    ("region_column",),
                    "FC208",
                    f'region column "{table.region_column}" of {table.fqn} is not in its primary key',
                    expected="a column listed in primary_key",
                    hint="a regional-by-row table's region is part of its key",
                )
            )
    for sink in project.sinks.values():
        out.extend(_check_sink(sink, loc))
    for feed in project.feeds.values():
        out.extend(_check_feed(project, feed, loc, incomplete))
    out.extend(_shared_folders(project, loc))
    out.extend(_staging(project, docs))
    out.extend(_remote_settings(project, docs))
    out.extend(_state(project, docs))
    return out


STATE_BACKENDS = ("sqlite", "postgresql")


def _state(project: Project, docs: dict[str, list[YamlDocument]]) -> list[Diagnostic]:
    """The state store's URL parses, and names a store feedctl keeps its state in (checked without
    SQLAlchemy, which compile does not otherwise import)."""
    if not docs.get("project") or "state" not in (docs["project"][0].data or {}):
        return []
    doc, url = docs["project"][0], project.state_url
    backend = url.split("://", 1)[0].split("+", 1)[0] if "://" in url else ""
    try:
        parts = urlsplit(url)
        _ = parts.port  # a port that is no number raises here
        problem = (
            ""
            if backend in STATE_BACKENDS
            else f"a {backend} database, which feedctl cannot keep its state in"
            if backend
            else "no scheme://"
        )
        if backend == "sqlite" and parts.path in ("", "/", "/:memory:"):
            problem = "an in-memory database, whose state each process would lose"
    except ValueError as exc:
        problem = f"it does not parse ({exc})"
    if not problem:
        return []
    pos = doc.position(("state",))
    return [
        Diagnostic(
            doc.file,
            pos.line,
            pos.column,
            "FC210",
            f"state URL {project.state_url_display}: {problem}",
            json_path="$.state",
            expected="sqlite:///<path> (one host) or postgresql://user@host/db "
            "(postgresql+psycopg://...; several hosts)",
        )
    ]


def _staging(project: Project, docs: dict[str, list[YamlDocument]]) -> list[Diagnostic]:
    """Executors on other hosts cannot read what the driver stages on its own disk."""
    spark = project.spark
    if spark.shares_disk or "://" in project.staging or not docs.get("project"):
        return []
    doc = docs["project"][0]
    if spark.remote:
        key, where = "remote", f"spark.remote {project.spark_remote_display} runs executors on the server's hosts"
    else:
        key, where = "master", f"spark.master {spark.master} runs executors on other hosts"
    pos = doc.position(("spark", key))
    return [
        Diagnostic(
            doc.file,
            pos.line,
            pos.column,
            "FC306",
            f"{where}, but batches are staged on this machine's disk ({project.staging})",
            json_path=f"$.spark.{key}",
            expected="a `staging:` URL every executor reaches: s3://, gs://, az:// or file:// on a shared mount",
            hint="add e.g. `staging: s3://bucket/feedctl-stage` to project.yml",
        )
    ]


def _remote_settings(project: Project, docs: dict[str, list[YamlDocument]]) -> list[Diagnostic]:
    """A Spark Connect session takes Spark SQL's runtime settings alone: the rest is the server's start."""
    spark = project.spark
    if not spark.remote or not docs.get("project"):
        return []
    doc = docs["project"][0]

    def ignored(path: tuple, message: str, **kw) -> Diagnostic:
        pos = doc.position(path)
        return Diagnostic(
            doc.file,
            pos.line,
            pos.column,
            "FC308",
            message,
            json_path=json_pointer(path),
            severity=Severity.WARNING,
            **kw,
        )

    out = []
    if isinstance(doc.data, dict) and "master" in (doc.data.get("spark") or {}):
        out.append(
            ignored(
                ("spark", "master"),
                f"spark.master {project.spark_master_display} is ignored: spark.remote runs the batches",
                hint="remove spark.master, or spark.remote to run on the master",
            )
        )
    for key in spark.ignored_by_remote():
        out.append(
            ignored(
                ("spark", "conf", key),
                f"spark.conf {key} is ignored by a Spark Connect session: it is set where the server starts",
                expected="under spark.remote, Spark SQL's runtime settings (spark.sql.*) and spark.hadoop.*",
                hint="set it on the server (a Databricks cluster's Spark config), or remove it",
            )
        )
    return out


def _shared_folders(project: Project, loc: Locator) -> list[Diagnostic]:
    """Two feeds in one cloud-storage folder: one feed's resolved file would claim the other's files final."""
    first: dict[str, str] = {}
    out = []
    for feed in project.feeds.values():
        sink = project.sinks.get(feed.sink or "")
        if sink is None or sink.kind != "cloudstorage":
            continue
        folder = sink.uri.split("?", 1)[0].rstrip("/")
        if folder in first:
            out.append(
                loc.diag(
                    feed,
                    ("sink",),
                    "FC305",
                    f'feeds "{first[folder]}" and "{feed.name}" write to the same folder {sink.uri_display}',
                    severity=Severity.WARNING,
                    hint="a consumer reading up to a .RESOLVED file of one feed would take the other "
                    "feed's files as final too; give each feed its own sink or folder",
                )
            )
        else:
            first[folder] = feed.name
    return out


def _check_sink(sink, loc: Locator) -> list[Diagnostic]:
    if not sink.uri:
        return []  # missing, empty or not rendered: reported already
    if sink.kind is None:
        return [
            loc.diag(
                sink,
                ("uri",),
                "FC207",
                f'unsupported sink URI "{sink.uri_display}"',
                expected="a URI starting with " + ", ".join(f"{s}://" for s in SCHEMES),
                hint=did_you_mean(sink.scheme, SCHEMES) if sink.scheme else "",
            )
        ]
    try:
        urlsplit(sink.uri)
    except ValueError as exc:  # a bracketed host that is no IP address, a port that is no number...
        return [
            loc.diag(
                sink,
                ("uri",),
                "FC207",
                f'sink URI "{sink.uri_display}" does not parse: {exc}',
                expected="scheme://host/path?parameters, with [brackets] only around an IPv6 address",
            )
        ]
    out = []
    for option in sink.options:
        kinds = SINK_OPTION_KINDS.get(option)
        if kinds and sink.kind not in kinds:
            out.append(
                loc.diag(
                    sink,
                    ("options", option),
                    "FC302",
                    f'option "{option}" does not apply to {sink.kind} sinks',
                    expected=f"a {' or '.join(sorted(kinds))} sink",
                )
            )
    flush = (sink.options.get("webhook_sink_config") or {}).get("Flush") if sink.kind == "webhook" else None
    if (
        isinstance(flush, dict)
        and (flush.get("Messages") or flush.get("Bytes"))
        and not _positive(flush.get("Frequency"))
    ):
        # As in CockroachDB: a size limit alone could hold the last messages back forever.
        out.append(
            loc.diag(
                sink,
                ("options", "webhook_sink_config", "Flush"),
                "FC301",
                "Flush.Messages or Flush.Bytes needs a non-zero Flush.Frequency",
                expected='a Frequency such as "1s"',
            )
        )
    return out


def _positive(duration) -> bool:
    seconds = feed_options.or_none(parse_duration, duration)
    return seconds is not None and seconds > 0


def _check_feed(project: Project, feed, loc: Locator, incomplete=frozenset()) -> list[Diagnostic]:
    out = []
    if feed.query_file and feed.tables:
        out.append(
            loc.diag(
                feed,
                ("tables",),
                "FC205",
                f'feed "{feed.name}" has both a query and tables',
                expected="either `query` (its FROM names the table) or `tables`",
            )
        )
    elif not loc.has_key(feed, "query") and not loc.has_key(feed, "tables"):
        out.append(
            loc.diag(
                feed,
                ("name",),
                "FC206",
                f'feed "{feed.name}" watches no table',
                expected="a `tables:` list or a `query:` file",
            )
        )
    query = project.root / feed.query_file if feed.query_file else None
    try:
        found = query is not None and query.exists()
    except OSError as exc:  # a name too long for the filesystem, say
        out.append(
            loc.diag(
                feed,
                ("query",),
                "FC204",
                f'query file "{feed.query_file}" cannot be looked for: {exc.strerror}',
                expected="a .sql file of the project",
            )
        )
        query = None
    if query is not None and not query.resolve().is_relative_to(project.root.resolve()):
        out.append(
            loc.diag(
                feed,
                ("query",),
                "FC204",
                f'query file "{feed.query_file}" is outside the project',
                expected="a .sql file inside the project, relative to the feed's YAML file",
            )
        )
    elif query is not None and found and not query.is_file():
        out.append(
            loc.diag(
                feed,
                ("query",),
                "FC204",
                f'query file "{feed.query_file}" is not a regular file',
                expected="a .sql file (not a folder, a FIFO or a device)",
            )
        )
    elif query is not None and not query.is_file():
        out.append(
            loc.diag(
                feed,
                ("query",),
                "FC204",
                f'query file "{feed.query_file}" does not exist',
                expected="a .sql file, relative to the feed's YAML file",
                hint=did_you_mean(
                    Path(feed.query_file).name, [p.name for p in (project.root / feed.query_file).parent.glob("*.sql")]
                ),
            )
        )
    for i, name in enumerate(feed.tables):
        if name not in project.tables and "table" not in incomplete:
            out.append(
                loc.diag(
                    feed,
                    ("tables", i),
                    "FC203",
                    f'unknown table "{name}"',
                    expected="a table declared under sources: in project.yml",
                    hint=did_you_mean(name, project.tables),
                )
            )
    sink = None
    if feed.sink is not None:
        sink = project.sinks.get(feed.sink)
        if sink is None and "sink" not in incomplete:
            out.append(
                loc.diag(
                    feed,
                    ("sink",),
                    "FC202",
                    f'unknown sink "{feed.sink}"',
                    expected="the name of a sink defined in sinks/",
                    hint=did_you_mean(feed.sink, project.sinks),
                )
            )
    elif "sink" not in incomplete:  # legal, and easy to mean otherwise
        out.append(
            loc.diag(
                feed,
                ("name",),
                "FC209",
                f"feed {feed.name} has no sink: `feedctl run` skips it",
                severity=Severity.WARNING,
                hint=f"`feedctl tail {feed.name}` prints its messages; add `sink:` to run it",
            )
        )
    sink_kind = sink.kind if sink else ("sinkless" if feed.sink is None else None)
    rules = feed_options.check(feed.options, sink_kind, bool(feed.query_file)) if feed.options_valid else []
    for rule in rules:
        out.append(
            loc.diag(
                feed,
                ("options", rule.option),
                rule.code,
                rule.message,
                severity=rule.severity,
                expected=rule.expected,
                hint=rule.hint,
            )
        )
    return out
