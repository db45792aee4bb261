"""The docs site of a project (`feedctl docs generate`): one self-contained HTML page, nothing fetched at view
time, built from what compile wrote (the manifest, already redacted, and the compiled queries), the tables'
columns and, when the state store can be read, each job's status, high-water mark and lag."""

from __future__ import annotations

from importlib import resources

from jinja2 import Environment

from feedctl.docs.lineage import lineage_svg
from feedctl.manual import manual_url


def _show(value) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)) and not value:
        return "[]" if isinstance(value, list) else "{}"
    return str(value)


def build_page(
    manifest: dict,
    raw_options: dict[str, dict],
    sql: dict[str, str | None],
    types: dict[str, dict[str, str]],
    jobs: list[dict] | None,
    jobs_problem: str = "",
) -> str:
    """The page (template: site.html.j2). `raw_options`: each feed's options as written (the others show
    their defaults); `types`: each table's columns and their Delta types, in order; `jobs`: `feedctl jobs`
    records, None when the store cannot be read."""
    tables, feeds, sinks = manifest["sources"], manifest["feeds"], manifest["sinks"]
    newest = {}
    for job in sorted(jobs or [], key=lambda j: j["job_id"]):
        newest[job["feed"]] = job
    page = Environment(autoescape=True).from_string(
        resources.files("feedctl.docs").joinpath("site.html.j2").read_text(encoding="utf-8")
    )
    return page.render(
        project={"name": manifest["metadata"]["project_name"], "description": manifest["project"].get("description")},
        version=manifest["metadata"]["feedctl_version"],
        generated_at=manifest["metadata"]["generated_at"],
        tables=tables,
        feeds=feeds,
        sinks=sinks,
        sql=sql,
        jobs=jobs,
        jobs_problem=jobs_problem,
        jobs_by_feed=newest,
        columns={t: list(types.get(t, {}).items()) for t in tables},
        set_options={f: [k for k in feeds[f]["options"] if k in raw_options.get(f, {})] for f in feeds},
        readers={t: sorted(f for f, d in feeds.items() if t in d["tables"]) for t in tables},
        writers={s: sorted(f for f, d in feeds.items() if d["sink"] == s) for s in sinks},
        lineage=lineage_svg(list(tables), {f: (d["tables"], d["sink"]) for f, d in feeds.items()}),
        show=_show,
        manual=manual_url(),
    )
