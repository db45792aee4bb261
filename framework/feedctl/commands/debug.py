"""`feedctl debug`: is this machine and this project ready to run? One line per check, saying what is wrong."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from pathlib import Path
from threading import Thread

import feedctl
from feedctl.compiler.compile import compile_project
from feedctl.diagnostics import ProjectError, first_line
from feedctl.options import InitialScan
from feedctl.sinks.cloudstorage import local_path
from feedctl.sinks.registry import SCHEMES, open_sink
from feedctl.source.change_source import ChangeSource
from feedctl.spark.place import SparkPlace
from feedctl.spark.session import check_executors, connected, master_unreachable, remote_unreachable
from feedctl.units import parse_timestamp, plural

MIN_JAVA = 17


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    warning: bool = False  # not ok, but not a failure either


def java_check() -> Check:
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not java or not Path(java).exists():
        return Check("java", False, "no java on PATH or in JAVA_HOME; install Java 17 or newer")
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check("java", False, f"{java} -version failed: {exc}")
    text = out.stderr + out.stdout
    match = re.search(r'version "(\d+)(?:\.(\d+))?', text)
    if not match:
        return Check("java", False, f"cannot read the version from: {text.strip()[:120]}")
    major = int(match.group(1)) if match.group(1) != "1" else int(match.group(2) or 0)
    if major < MIN_JAVA:
        return Check("java", False, f"Java {major} at {java}; Spark 4 needs Java {MIN_JAVA} or newer")
    return Check("java", True, f"Java {major} at {java}")


def spark_check() -> Check:
    spec = importlib.util.find_spec("pyspark")
    if spec is None:
        return Check("spark", False, "pyspark is not installed")
    from pyspark.version import __version__ as version

    jars = Path(spec.origin).parent / "jars"
    delta = importlib.util.find_spec("delta") is not None
    detail = (
        f"pyspark {version}; {len(list(jars.glob('*.jar')))} jars; delta-spark python package "
        + ("installed" if delta else "absent")
        + " (Delta is read with deltalake unless Delta's jars are on the classpath)"
    )
    return Check("spark", True, detail)


def _unwritable(folder: Path) -> str:
    """Why files cannot be created in `folder` (or in the nearest existing folder above it); '' if they can."""
    existing = folder
    while not existing.exists():
        existing = existing.parent
    try:
        with tempfile.NamedTemporaryFile(dir=existing):
            pass
    except OSError as exc:
        return f"{existing} is not writable ({exc})"
    return ""


def state_check(project) -> Check:
    url = project.state_url
    if url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///"))
        path = path if path.is_absolute() else project.root / path
        problem = _unwritable(path.parent)
        if problem:
            return Check("state store", False, f"{path}: {problem}")
        return Check("state store", True, f"{project.state_url_display} (writable)")
    if url.startswith("postgresql"):
        try:
            import sqlalchemy

            with sqlalchemy.create_engine(url).connect() as conn:
                conn.execute(sqlalchemy.text("SELECT 1"))
        except Exception as exc:
            return Check(
                "state store", False, f"{project.state_url_display}: {type(exc).__name__}: {first_line(exc, 160)}"
            )
        return Check("state store", True, f"{project.state_url_display} (connected)")
    return Check(
        "state store",
        False,
        f"unsupported state URL {project.state_url_display}; use sqlite:///path or postgresql+psycopg://...",
    )


def table_checks(project, followed: dict[str, dict[str, str | None]]) -> list[Check]:
    """Each table opened as `run` opens it: its protocol, a first batch of its snapshot, and of the changes
    the feeds following it read (`followed`: table -> the feeds that do, and their cursors)."""
    from feedctl.compiler.table_schema import read_table_schema
    from feedctl.source.table_features import TableRefused

    checks = []
    for fqn, table in project.tables.items():
        try:
            schema = read_table_schema(table.location, table.storage_options)
        except TableRefused as exc:
            checks.append(Check(f"table {fqn}", False, str(exc)))
            continue
        except Exception as exc:
            reason = first_line(exc, 160)
            checks.append(Check(f"table {fqn}", False, f"cannot open {table.location_display}: {reason}"))
            continue
        missing = [c for c in table.primary_key if c not in schema.columns]
        following = followed.get(fqn, {})
        if schema.unreadable:
            checks.append(Check(f"table {fqn}", False, schema.unreadable))
        elif not schema.change_data_feed and following and table.changes == ChangeSource.CDF:
            checks.append(
                Check(
                    f"table {fqn}",
                    False,
                    f"version {schema.version} has its change data feed off, and "
                    f"{', '.join(following)} follow its changes from it alone (`changes: cdf`); set "
                    "delta.enableChangeDataFeed=true, or read them from the log (`changes: log` or `auto`)",
                )
            )
        elif missing:
            checks.append(Check(f"table {fqn}", False, f"primary key columns {missing} not in the table"))
        else:
            problem = _first_rows(fqn, table, schema.version, list(following.values()))
            checks.append(
                Check(
                    f"table {fqn}",
                    not problem,
                    problem or f"version {schema.version}, {len(schema.columns)} columns, read",
                )
            )
    return checks


# Versions of a followed range whose changes `debug` reads, at most: the first, each schema change and the
# version before it, the newest.
_SAMPLED = 12


def _first_rows(fqn: str, table, version: int, cursors: list[str | None]) -> str | None:
    """Why the first batch of the table's snapshot, or of the changes the feeds following it (`cursors`, one
    per feed: None, from the newest version) would read, cannot be read: the range from the earliest cursor
    to `version`, its schema history, a sample of its versions' changes as a job reads them (its key under
    its name at each)."""
    from feedctl.source.delta import of_table

    source = of_table(fqn, table)
    at = None
    try:
        next(iter(source.snapshot(version)), None)
        first = min((_cursor_version(source, c, version) for c in cursors), default=version)
        for at in _sampled(source, first, version):
            key = source.names_at(at, table.primary_key)
            missing = [c for c in key if c not in source.layout(at).schema.names]
            if missing:
                return f"version {at} has no primary key column {', '.join(missing)}"
            next(iter(source.changes(at - 1, at, key=key)), None)
    except Exception as exc:
        where = f" (the changes of version {at})" if at is not None else ""
        return f"cannot read {table.location_display}{where}: {first_line(exc, 200)}"
    return None


def _cursor_version(source, cursor: str | None, newest: int) -> int:
    """The version after which a new job of a feed with `cursor` follows the table."""
    from feedctl.job.start import version_at

    if cursor is None:
        return newest
    point = parse_timestamp(cursor)
    if point.version is not None:
        return min(point.version, newest)
    return version_at(source, point.hlc, newest)


def _sampled(source, first: int, newest: int) -> list[int]:
    """The versions of (first, newest] whose changes are read: the first, each schema change and the version
    before it, the newest; at most `_SAMPLED`."""
    if newest <= first:
        return []
    changes = source.schema_changes(first, newest)
    wanted = {first + 1, newest, *changes, *(v - 1 for v in changes)}
    picked = sorted(v for v in wanted if first < v <= newest)
    return picked if len(picked) <= _SAMPLED else [*picked[: _SAMPLED - 1], newest]


def sink_checks(project) -> list[Check]:
    checks = []
    for name, sink in project.sinks.items():
        scheme_kind, module = SCHEMES.get(sink.scheme, (None, None))
        if scheme_kind is None:
            checks.append(Check(f"sink {name}", False, f"unsupported scheme in {sink.uri_display}"))
        elif module and importlib.util.find_spec(module) is None:
            checks.append(
                Check(
                    f"sink {name}", False, f"{sink.scheme}:// needs the Python package providing {module}; install it"
                )
            )
        else:
            where = local_path(sink.uri, project.root)
            problem = _unwritable(where) if where else open_sink(sink.uri, sink.options, project.root).unreachable(5.0)
            checks.append(
                Check(
                    f"sink {name}",
                    not problem,
                    f"{sink.kind} sink {sink.uri_display}"
                    + (f" ({where})" if where else "")
                    + (f": {problem}" if problem else ""),
                )
            )
    return checks


def master_check(place: SparkPlace) -> Check | None:
    """Whether a standalone master (`spark://host:port[,host:port]`) or a Spark Connect server answers; None
    for a local master."""
    if place.remote:
        return remote_check(place)
    master = place.master
    if master.startswith("local"):
        return None
    if not master.startswith("spark://"):
        return Check("spark master", True, f"{master}: not checked (only spark:// masters are)", warning=True)
    problem = master_unreachable(master)
    return Check("spark master", not problem, problem or f"{master} accepts connections")


def remote_check(place: SparkPlace, timeout: float = 30.0) -> Check:
    """A session with the Spark Connect server and a task on its executors (which must import this feedctl),
    given `timeout` seconds: a server that accepts the connection but never answers fails the check rather
    than hanging it."""
    where = place.described()
    problem = remote_unreachable(place, timeout=min(timeout, 5.0))
    if problem:
        return Check("spark remote", False, problem)
    answer: Future = Future()

    def ask() -> None:
        try:
            spark = connected(place.remote, place)
            check_executors(spark, place)
            answer.set_result(f"Spark {spark.version}")
        except Exception as exc:
            answer.set_exception(exc)

    Thread(target=ask, name="debug-remote", daemon=True).start()
    try:
        version = answer.result(timeout=timeout)
    except FutureTimeout:
        return Check("spark remote", False, f"{where} accepts connections but gave no session in {timeout:g}s")
    except Exception as exc:
        return Check("spark remote", False, f"{where}: {first_line(exc, 400)}")
    return Check("spark remote", True, f"{where}: {version}, its executors run feedctl {feedctl.__version__}")


def run_checks(project_dir) -> list[Check]:
    checks = [java_check(), spark_check()]
    try:
        result = compile_project(project_dir, check_tables=False)
        project = result.project
    except ProjectError as exc:
        errors = [d for d in exc.diagnostics if d.is_error]
        first = errors[0].format().splitlines()[0]
        checks.append(Check("project", False, f"{plural(len(errors), 'error')}; first: {first}"))
        return checks
    checks.append(
        Check(
            "project",
            True,
            f"{project.name}: {plural(len(project.feeds), 'feed')}, "
            f"{plural(len(project.sinks), 'sink')}, {plural(len(project.tables), 'table')}",
        )
    )
    master = master_check(project.spark)
    if master is not None:
        checks.append(master)
    checks.append(state_check(project))
    followed: dict[str, dict[str, str | None]] = {}
    for feed in result.feeds.values():
        if feed.options.initial_scan != InitialScan.ONLY:
            for table in feed.tables:
                followed.setdefault(table, {})[feed.feed.name] = feed.options.cursor
    checks.extend(table_checks(project, followed))
    checks.extend(sink_checks(project))
    return checks
