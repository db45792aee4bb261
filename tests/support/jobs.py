"""A job's definition, and a job as the store returns it, for tests that make jobs by hand."""

from __future__ import annotations

from feedctl import options as feed_options
from feedctl.job.definition import JobDefinition
from feedctl.state.jobs import Job, stored
from feedctl.units import Hlc


def definition(*tables: str, **options) -> JobDefinition:
    """A plain feed of `tables` into sink `out`, with `options` (as stored: strings for valued options) over the
    defaults."""
    return JobDefinition(
        tables=tables, sql=None, options=feed_options.resolve({}, None, False).with_values(options), sink="out"
    )


_plain = definition  # `stored_job`'s parameter takes the name


def stored_job(job_id: int, status: str = "running", definition: JobDefinition | None = None, **fields) -> Job:
    """A job of feed `f` (version 1, plain, into `file://out`), with `fields` over those, and `definition`
    stored as the store holds it."""
    values = dict(
        job_id=job_id,
        feed="f",
        version=1,
        status=status,
        definition_hash="sha256:x",
        definition_json=stored(definition or _plain("s.t")),
        sink_uri="file://out",
        created_at=0.0,
        modified_at=0.0,
        finished_at=None,
        start=Hlc(0),
        high_water=Hlc(0),
        resolved=Hlc(0),
        resolved_at=None,
        checkpoint_at=None,
        note="",
        error="",
        coordinator=None,
        lease_expires_at=None,
        lease_epoch=0,
        initial_scan_done=False,
    )
    return Job(**{**values, **fields})
