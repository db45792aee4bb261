"""target/manifest.json and target/compiled/: what compile produced, versioned and validated on write."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from functools import cache
from importlib import resources
from pathlib import Path

from feedctl import __version__
from feedctl.compiler import contract
from feedctl.compiler.compile import CompileResult
from feedctl.project import schema_check
from feedctl.project.secrets import redact_mapping, scrub_text

MANIFEST_SCHEMA_VERSION = "feedctl/manifest/v4"


@cache
def manifest_schema() -> dict:
    return json.loads(resources.files("feedctl.compiler").joinpath("manifest.schema.json").read_text())


def build_manifest(result: CompileResult, selectors: list[str] | None = None) -> dict:
    project = result.project
    sources = {}
    for fqn, table in project.tables.items():
        schema = result.table_schemas.get(fqn)
        sources[fqn] = {
            "path": table.path_display,
            "location": table.location_display,
            "primary_key": table.primary_key,
            "locality": table.locality,
            "region_column": table.region_column,
            "spans": table.spans,
            "changes": table.changes,
            "columns": schema.columns if schema else None,
            "partition_columns": schema.partition_columns if schema else None,
            "types": schema.types if schema else None,
            "version": schema.version if schema else None,
            "storage_options": redact_mapping(table.storage_options_display),
        }
    feeds = {}
    for name, compiled in result.feeds.items():
        feed = compiled.feed
        feeds[name] = {
            "name": name,
            "description": feed.description,
            "tags": feed.tags,
            "meta": feed.meta,
            "file": feed.origin.file,
            "line": feed.origin.line,
            "tables": compiled.tables,
            "sink": feed.sink,
            "options": compiled.options.to_json(),
            "query": {"path": feed.query_file, "compiled_path": f"target/compiled/{name}.sql"}
            if compiled.sql
            else None,
            "columns": compiled.columns,
            "pushdown": {t: p.to_json() for t, p in compiled.pushdown.items()},
            "schema_checked": compiled.schema_checked,
            "definition_hash": compiled.definition_hash,
            "version": feed.version,
            "contract_enforced": feed.contract_enforced,
        }
    return {
        "metadata": {
            "manifest_schema_version": MANIFEST_SCHEMA_VERSION,
            "feedctl_version": __version__,
            "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z"),
            "project_name": project.name,
            "selectors": list(selectors or []),
        },
        "project": {
            "name": project.name,
            "description": project.description,
            "state": project.state_url_display,
            "spark": {
                "master": project.spark_master_display,
                **({"remote": project.spark_remote_display} if project.spark.remote else {}),
                "conf": project.spark_conf_display,
            },
            "vars": result.vars,
        },
        "sources": sources,
        "sinks": {
            n: {"uri": s.uri_display, "kind": s.kind, "description": s.description, "options": s.options_display}
            for n, s in project.sinks.items()
        },
        "feeds": feeds,
    }


@cache
def _fast_check():
    return schema_check.fast_check(manifest_schema())


def validate_manifest(manifest: dict) -> None:
    """Raises jsonschema.ValidationError when the manifest does not match its schema."""
    if not _fast_check()(manifest):
        from jsonschema import Draft202012Validator  # for its message: slower, and rarely needed

        Draft202012Validator(manifest_schema()).validate(manifest)


def write_whole(path: Path, text: str) -> None:
    # Write then rename: a reader never sees half a file. A file as it is already is left alone: a compile
    # that changed nothing rewrites little.
    try:
        if path.read_text(encoding="utf-8") == text:
            return
    except (OSError, UnicodeDecodeError):
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def write_schemas(target: Path) -> None:
    """The JSON Schemas of the project files, for editors (`# yaml-language-server: $schema=...`)."""
    for kind in schema_check.SCHEMA_FILES:
        write_whole(target / "schemas" / f"{kind}.schema.json", schema_check.schema_text(kind))


def write_target(result: CompileResult, selectors: list[str] | None = None) -> Path:
    """Write target/manifest.json, target/compiled/<feed>.sql, target/contracts/<feed>.json and
    target/schemas/; returns the manifest path."""
    target = result.project.root / "target"
    manifest = build_manifest(result, selectors)
    validate_manifest(manifest)
    for name, compiled in result.feeds.items():
        if compiled.sql:
            write_whole(target / "compiled" / f"{name}.sql", scrub_text(compiled.sql, compiled.secrets))
        if compiled.feed.sink is not None:
            text = json.dumps(contract.of_feed(compiled, result).to_json(), indent=2, sort_keys=False)
            write_whole(target / "contracts" / f"{name}.json", text + "\n")
    write_schemas(target)
    path = target / "manifest.json"
    write_whole(path, json.dumps(manifest, sort_keys=False) + "\n")  # one line: encoded in C, 10 times faster
    return path
