"""`feedctl schemas freeze`: the tables' columns and types written to schemas.yml (`compiler/frozen_schemas.py`)."""

from __future__ import annotations

from feedctl.compiler import frozen_schemas
from feedctl.project.loader import load_project
from feedctl.units import plural


def freeze(project_dir, event, error) -> bool:
    """Write schemas.yml, saying what it holds; False when a table could not be opened."""
    project, _ = load_project(project_dir)
    path, written, unreadable = frozen_schemas.freeze(project)
    for table in unreadable:
        error(f"cannot open table {table}; its entry in {frozen_schemas.FILE}, if any, is kept")
    event(
        f"Wrote {path}: {len(written)} of {plural(len(project.tables), 'table')} as they are now",
        event="schemas_frozen",
        path=str(path),
        tables=written,
    )
    return not unreadable
