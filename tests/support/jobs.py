"""A job's definition for tests that write jobs into a state store by hand."""

from __future__ import annotations

from feedctl.job.definition import JobDefinition
from feedctl.project import options as feed_options


def definition(*tables: str, **options) -> JobDefinition:
    """A plain feed of `tables` into sink `out`, with `options` (as stored: strings for valued options) over the
    defaults."""
    return JobDefinition(
        tables=tables, sql=None, options=feed_options.resolve({}, None, False).with_values(options), sink="out"
    )
