"""What `feedctl plan` compares a feed with: its job as it runs, from the state store, or the feed as an
earlier build compiled it (`--state DIR`, as dbt's), in one shape, `Before`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from feedctl.compiler.state import read_manifest
from feedctl.diagnostics import UsageError
from feedctl.job.definition import definition_of
from feedctl.job.key_change import Key
from feedctl.options import Options
from feedctl.sinks.versioned import located
from feedctl.state import jobs
from feedctl.state.store import StateStore


@dataclass(frozen=True)
class Before:
    """A feed as it runs (its job) or as an earlier build compiled it."""

    tables: list[str]
    sql: str | None
    options: Options
    sink: str | None
    keys: dict[str, Key]  # table -> its key, as the job emits it (or the build declared it)
    metadata: dict | None  # description, tags, meta (None: not known, a job created before they were kept)
    definition_hash: str
    sink_display: dict | None = None  # its sink: name, URI and options, redacted (None: not known)
    job: jobs.Job | None = None
    schemas: dict[str, dict] | None = None  # table -> column -> Delta type, as the build read them
    version: int = 1  # its contract version
    others: tuple[jobs.Job, ...] = ()  # running or paused jobs of its other versions, which run on beside it


def from_jobs(project) -> tuple[dict[str, Before], dict[str, jobs.Job]]:
    """Running and paused jobs by feed; and the newest job of feeds whose job stopped."""
    store = StateStore.of_project(project)
    try:
        with store.reading() as conn:
            every = jobs.list_jobs(conn)
    finally:
        store.close()
    newest = {j.feed: j for j in every}  # in creation order: the last one wins
    befores, stopped = {}, {}
    for name, job in newest.items():
        others = tuple(j for j in every if j.feed == name and j.version != job.version and j.status in jobs.ACTIVE)
        if job.status not in jobs.ACTIVE:
            stopped[name] = job
            continue
        d = definition_of(job)
        befores[name] = Before(
            list(d.tables),
            d.sql,
            d.options,
            d.sink,
            d.keys,
            d.metadata,
            job.definition_hash,
            d.sink_display,
            job,
            version=job.version,
            others=others,
        )
    return befores, stopped


def from_manifest(state: Path) -> dict[str, Before]:
    path = state / "manifest.json"
    manifest = read_manifest(state)
    out = {}
    for name, f in manifest.get("feeds", {}).items():
        sql = None
        if f.get("query"):
            compiled = state / "compiled" / f"{name}.sql"
            sql = compiled.read_text() if compiled.exists() else ""
        sources = manifest.get("sources", {})
        keys = {
            t: Key.of(sources[t]["primary_key"], sources[t].get("region_column")) for t in f["tables"] if t in sources
        }
        sink = manifest.get("sinks", {}).get(f["sink"]) if f.get("sink") else None
        try:  # an option the build did not have at its default, as a job's definition reads it
            options = Options.from_json(f["options"], bool(f.get("query")))
        except (ValueError, TypeError) as exc:
            raise UsageError(
                f"--state {state}: {path} gives feed {name} options this feedctl does not take ({exc}); compile "
                "the earlier project again, with this feedctl"
            ) from None
        out[name] = Before(
            f["tables"],
            sql,
            options,
            f.get("sink"),
            keys,
            {"description": f.get("description", ""), "tags": f.get("tags", []), "meta": f.get("meta", {})},
            f["definition_hash"],
            _sink_display(f["sink"], sink, f.get("version", 1)) if sink else None,
            schemas={
                t: {c: (sources[t].get("types") or {}).get(c) for c in sources[t]["columns"]}
                for t in f["tables"]
                if t in sources and sources[t].get("columns") is not None and sources[t].get("types") is not None
            },
            version=f.get("version", 1),
        )
    return out


def _sink_display(name: str, sink: dict, version: int) -> dict:
    """The manifest's sink as a feed's definition holds it: at the feed's contract version's location."""
    uri, options = located(sink["uri"], sink["options"], version)
    return {"name": name, "uri": uri, "options": options}
