"""`feedctl ls`: the selected feeds with their tables and sinks, from a compile that opens no table."""

from __future__ import annotations

from feedctl.compiler.state import compile_selected


def list_feeds(
    project_dir, selectors: list[str] | None = None, vars_override: dict | None = None, state_dir: str | None = None
) -> list[dict]:
    result = compile_selected(project_dir, selectors, state_dir, vars_override=vars_override, check_tables=False)
    records = []
    for name, compiled in result.feeds.items():
        feed = compiled.feed
        records.append(
            {
                "name": name,
                "tables": compiled.tables,
                "sink": feed.sink,
                "sink_uri": compiled.sink_display["uri"] if compiled.sink_display else None,  # at its version
                "version": feed.version,
                "query": feed.query_file,
                "tags": feed.tags,
                "description": feed.description,
                "file": f"{feed.origin.file}:{feed.origin.line}",
            }
        )
    return records
