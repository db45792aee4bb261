"""`feedctl docs generate` and `feedctl docs serve`: the project's docs site, as dbt's docs are: compile,
then one static page under target/docs/, served on 127.0.0.1."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import partial
from http.server import HTTPServer, SimpleHTTPRequestHandler
from pathlib import Path

from feedctl.commands.compile import compile_target
from feedctl.commands.jobs import job_records
from feedctl.compiler.manifest import write_whole
from feedctl.diagnostics import UsageError, first_line
from feedctl.docs.site import build_page
from feedctl.project.env_vars import SECRET_VALUES
from feedctl.project.secrets import scrub_text


@dataclass
class Generated:
    path: Path
    tables: int
    feeds: int
    sinks: int
    jobs: int | None  # None: the state store could not be read


def generate(project_dir, vars_override: dict | None = None) -> Generated:
    done = compile_target(project_dir, [], vars_override)
    result, target = done.result, done.manifest.parent
    for contract in sorted((target / "contracts").glob("*.json")):  # published beside the page, for consumers
        write_whole(target / "docs" / "contracts" / contract.name, contract.read_text(encoding="utf-8"))
    manifest = json.loads(done.manifest.read_text(encoding="utf-8"))
    sql = {
        name: scrub_text(compiled.sql, compiled.secrets) if compiled.sql else compiled.sql
        for name, compiled in result.feeds.items()
    }  # as in target/compiled/
    types = {
        t: {c: _type_text(s.types.get(c, "")) for c in s.columns}
        for t, s in result.table_schemas.items()
        if s is not None
    }
    raw = {name: result.project.feeds[name].options for name in manifest["feeds"]}
    try:
        jobs, problem = job_records(project_dir, every=True, headroom=True), ""
    except Exception as exc:  # the site is still worth having without them
        jobs, problem = None, scrub_text(first_line(exc), SECRET_VALUES)
    path = target / "docs" / "index.html"
    write_whole(path, build_page(manifest, raw, sql, types, jobs, problem))
    return Generated(
        path,
        len(manifest["sources"]),
        len(manifest["feeds"]),
        len(manifest["sinks"]),
        None if jobs is None else len(jobs),
    )


def _type_text(delta_type) -> str:
    """`long`, or a nested type (struct, array, map) as its JSON."""
    return delta_type if isinstance(delta_type, str) else json.dumps(delta_type)


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # the page is the output; requests are not worth a line each
        pass


def server(project_dir, port: int, host: str = "127.0.0.1") -> HTTPServer:
    """A server of target/docs/ (`generate` first); `serve_forever()` it, `server_close()` it when done."""
    folder = Path(project_dir) / "target" / "docs"
    if not (folder / "index.html").is_file():
        raise UsageError(f"no docs site in {folder}: run `feedctl docs generate` first")
    try:
        return HTTPServer((host, port), partial(_Quiet, directory=str(folder)))
    except OSError as exc:
        raise UsageError(f"cannot serve the docs on {host}:{port}: {exc.strerror or exc}") from None
