"""A feed's earlier contract version. A feed whose `version:` rose runs a new job into a location of its own
(`sinks/versioned.py`); the job of each earlier version runs on beside it, from its own definition, into its
own location, until it is canceled (`feedctl cancel orders@v1`), as dbt keeps a model's older versions for
the consumers still reading them. The project now defines only the newest version: the older job takes no
change of it, the definition it was created with and the revisions it took being all it runs."""

from __future__ import annotations

from dataclasses import replace

from feedctl.compiler.compile import CompiledFeed
from feedctl.compiler.read_plan import Pushdown
from feedctl.errors import RunError
from feedctl.job.definition import definition_of
from feedctl.project.model import FeedDef, Project
from feedctl.state import jobs


def as_compiled(job: jobs.Job, feed: FeedDef, project: Project) -> CompiledFeed:
    """What a node runs of an earlier version's `job`: its definition as `run` compiles a feed. Its tables are
    read whole (no pushdown): the query it was created with is not compiled again against tables that may
    have changed since; its WHERE still keeps what it emits."""
    d = definition_of(job)
    if d.sink not in project.sinks:
        raise RunError(
            f"feed {job.label}: its job {job.job_id} emits into sink {d.sink}, which the project no longer "
            f"defines; it runs on nodes whose project has it, until canceled (`feedctl cancel {job.job_id}`)"
        )
    return CompiledFeed(
        feed=replace(feed, version=job.version, sink=d.sink, tables=list(d.tables), options=d.options.to_json()),
        tables=list(d.tables),
        sql=d.sql,
        options=d.options,
        columns=d.columns or {},
        pushdown={t: Pushdown(columns=None) for t in d.tables},
        schema_checked=True,
        definition_hash=job.definition_hash,
        sink_display=d.sink_display,
    )
