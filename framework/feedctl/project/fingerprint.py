"""What a project's files are at a moment, cheaply: each file's path, size and modification time. A
`--follow` node compares it between polls to see its project change under it."""

from __future__ import annotations

from pathlib import Path

from feedctl.project.loader import find_files


def project_files(root: Path) -> list[Path]:
    """Every file the compiler reads: project.yml, feeds (YAML and queries), sinks and macros."""
    return [
        root / "project.yml",
        *find_files(root, "feeds", (".yml", ".yaml", ".sql")),
        *find_files(root, "sinks", (".yml", ".yaml")),
        *find_files(root, "macros", (".sql",)),
    ]


def fingerprint(root: Path) -> tuple:
    out = []
    for path in project_files(root):
        try:
            stat = path.stat()
        except OSError:  # removed since listed, or project.yml missing: the compiler says so
            continue
        out.append((str(path), stat.st_size, stat.st_mtime_ns))
    return tuple(out)
