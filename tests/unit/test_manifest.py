"""target/manifest.json: its schema, its contents, and the JSON Schemas shipped for the project files."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import jsonschema
import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

import feedctl
from feedctl.compiler import manifest as manifest_module
from feedctl.compiler.manifest import MANIFEST_SCHEMA_VERSION, manifest_schema, validate_manifest
from feedctl.options import DEFAULTS
from support import Cli

PACKAGE = Path(feedctl.__file__).parent
MANIFEST_SCHEMA = PACKAGE / "compiler" / "manifest.schema.json"
PROJECT_SCHEMAS = PACKAGE / "project" / "schemas"

# sha256 of manifest.schema.json for each manifest_schema_version. Changing the schema's file means changing
# the manifest's shape (or at least its documentation): bump MANIFEST_SCHEMA_VERSION when the shape changes,
# and add the new hash here.
KNOWN = {
    "feedctl/manifest/v1": "ffd60d1c39d3e15f803e3f4fa630f361e2e209edc39b91e6bd9db6d1d7ececac",
    "feedctl/manifest/v2": "e2ef29aa507170be1eb5396876575cbc5b965fcadb8e6574a6bbc7bc03c54b38",
    "feedctl/manifest/v3": "f5be48687cd12a7b984647a6718303ece9a39ffb400d763e232e6aa7154fa01a",
    "feedctl/manifest/v4": "af55ab1f92c5a04bf29cc72150c43131c3ad2bfc008d9ab3e0a10682b6b4e3e2",
}


def compile_and_read(project: Path, *args: str) -> dict:
    result = Cli(project)("compile", *args)
    assert result.exit_code == 0, result.output
    return json.loads((project / "target" / "manifest.json").read_text(encoding="utf-8"))


@pytest.fixture(params=["demo", "init"])
def compiled(request, demo_project, init_project) -> tuple[Path, dict]:
    project = demo_project if request.param == "demo" else init_project
    return project, compile_and_read(project)


# --- the manifest ----------------------------------------------------------------------------------------


def test_manifest_validates_against_its_schema(compiled):
    _, m = compiled
    Draft202012Validator(json.loads(MANIFEST_SCHEMA.read_text())).validate(m)
    validate_manifest(m)


def test_metadata(compiled):
    project, m = compiled
    meta = m["metadata"]
    assert meta["manifest_schema_version"] == MANIFEST_SCHEMA_VERSION
    assert (
        meta["manifest_schema_version"]
        == manifest_schema()["properties"]["metadata"]["properties"]["manifest_schema_version"]["const"]
    )
    assert meta["feedctl_version"] == feedctl.__version__
    generated = datetime.fromisoformat(meta["generated_at"])
    assert generated.tzinfo is not None and generated.utcoffset() == timedelta(0)
    assert abs(datetime.now(timezone.utc) - generated) < timedelta(minutes=5)
    assert meta["project_name"] == m["project"]["name"]


def test_every_feed_is_complete(compiled):
    project, m = compiled
    assert m["feeds"]
    for name, feed in m["feeds"].items():
        assert feed["name"] == name
        assert set(DEFAULTS) <= set(feed["options"]), f"{name}: options without their defaults"
        assert feed["tables"] and set(feed["tables"]) <= set(m["sources"])
        assert set(feed["columns"]) == set(feed["tables"])
        assert set(feed["pushdown"]) == set(feed["tables"])
        for pd in feed["pushdown"].values():
            assert {"columns", "predicates", "partition_predicates"} <= set(pd)
        assert re.fullmatch(r"sha256:[0-9a-f]{64}", feed["definition_hash"])
        assert feed["sink"] in m["sinks"]
        assert (project / feed["file"]).is_file() and feed["line"] > 0
        if feed["query"] is not None:
            assert feed["query"]["compiled_path"] == f"target/compiled/{name}.sql"
            compiled_sql = project / feed["query"]["compiled_path"]
            assert compiled_sql.is_file() and "SELECT" in compiled_sql.read_text().upper()
            assert (project / feed["query"]["path"]).is_file()
            assert len(feed["tables"]) == 1


def test_demo_feeds(demo_project):
    m = compile_and_read(demo_project)
    feeds = m["feeds"]
    assert set(feeds) == {"movr_all", "vehicles_in_use", "ride_ends"}
    assert feeds["movr_all"]["query"] is None
    assert feeds["movr_all"]["tables"] == ["movr.users", "movr.vehicles", "movr.rides"]
    assert feeds["vehicles_in_use"]["tables"] == ["movr.vehicles"]
    assert feeds["vehicles_in_use"]["options"]["envelope"] == "wrapped"  # as written
    assert feeds["ride_ends"]["options"]["envelope"] == "bare"  # a query's default, as in CockroachDB
    assert feeds["ride_ends"]["options"]["initial_scan"] == "no"
    # the demo's tables do not exist until `workload init`: nothing was checked against a schema
    assert not any(f["schema_checked"] for f in feeds.values())
    assert all(s["columns"] is None for s in m["sources"].values())
    assert m["sources"]["movr.vehicles"]["region_column"] == "crdb_region"
    assert m["sources"]["movr.vehicles"]["spans"] == 2
    assert m["project"]["vars"] == {"min_battery": 20}


def test_init_feeds_are_schema_checked(init_project):
    m = compile_and_read(init_project)
    source = m["sources"]["shop.orders"]
    assert source["columns"] == ["id", "customer", "status", "amount"]
    assert source["version"] == 0 and source["partition_columns"] == []
    feeds = m["feeds"]
    assert all(f["schema_checked"] for f in feeds.values())
    assert feeds["orders"]["columns"] == {"shop.orders": None}  # a plain feed reads every column
    read = feeds["large_orders"]["columns"]["shop.orders"]
    assert read is not None and {"id", "customer", "status", "amount"} <= set(read)
    assert feeds["orders"]["options"]["key_in_value"] is True  # forced on for cloud storage


def test_selectors_are_recorded(demo_project):
    m = compile_and_read(demo_project, "-s", "tag:dispatch", "-s", "ride_ends")
    assert m["metadata"]["selectors"] == ["tag:dispatch", "ride_ends"]
    assert set(m["feeds"]) == {"vehicles_in_use", "ride_ends"}
    validate_manifest(m)


def test_definition_hash(init_project):
    first = compile_and_read(init_project)["feeds"]
    again = compile_and_read(init_project)["feeds"]
    assert {n: f["definition_hash"] for n, f in first.items()} == {n: f["definition_hash"] for n, f in again.items()}

    feeds = init_project / "feeds" / "orders.yml"
    text = feeds.read_text()
    feeds.write_text(text.replace("Every change of shop.orders.", "Something else entirely."))
    described = compile_and_read(init_project)["feeds"]
    assert described["orders"]["definition_hash"] == first["orders"]["definition_hash"]  # descriptions don't count

    feeds.write_text(text.replace("      diff: true\n", "      diff: true\n      cursor: '2026-01-01T00:00:00Z'\n"))
    started = compile_and_read(init_project)["feeds"]
    assert started["orders"]["definition_hash"] == first["orders"]["definition_hash"]  # where a job starts
    assert started["orders"]["options"]["initial_scan"] == "no"

    feeds.write_text(text.replace("      diff: true\n", "      diff: false\n"))
    tuned = compile_and_read(init_project)["feeds"]
    assert tuned["orders"]["definition_hash"] == first["orders"]["definition_hash"]  # a job takes it in place

    feeds.write_text(text.replace("      diff: true\n", "      diff: true\n      full_table_name: true\n"))
    changed = compile_and_read(init_project)["feeds"]
    assert changed["orders"]["definition_hash"] != first["orders"]["definition_hash"]
    assert changed["large_orders"]["definition_hash"] == first["large_orders"]["definition_hash"]

    feeds.write_text(text)
    varied = compile_and_read(init_project, "--vars", "{min_amount: 50}")["feeds"]
    assert varied["large_orders"]["definition_hash"] != first["large_orders"]["definition_hash"]
    assert varied["orders"]["definition_hash"] == first["orders"]["definition_hash"]


def test_a_job_created_when_the_hash_held_every_option_still_matches(init_project):
    """Hashes made before a job's start (cursor, initial_scan) and its in-place options left the definition:
    its job is not refused, whatever those options are now."""
    from feedctl.compiler.compile import compile_project, definition_hash

    compiled = compile_project(init_project).feeds["orders"]
    then_options = compiled.options.with_values({"cursor": "version:3", "diff": not compiled.options.diff})
    body = {
        "tables": compiled.tables,
        "sql": compiled.sql,
        "options": then_options.to_json(),
        "sink": compiled.sink_display,
    }  # as hashed then, with the cursor the job started at
    then = "sha256:" + hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()
    assert compiled.definition_hash != then
    assert definition_hash(compiled, then_options, compiled.tables) == then


def test_an_invalid_manifest_is_refused(init_project):
    m = compile_and_read(init_project)
    validate_manifest(m)
    for broken in (
        {**m, "surprise": 1},
        {**m, "metadata": {**m["metadata"], "manifest_schema_version": "feedctl/manifest/v0"}},
        {**m, "feeds": {"orders": {**m["feeds"]["orders"], "definition_hash": "md5:abc"}}},
        {**m, "feeds": {"orders": {k: v for k, v in m["feeds"]["orders"].items() if k != "options"}}},
    ):
        with pytest.raises(jsonschema.ValidationError):
            validate_manifest(broken)


# --- the schema's version ----------------------------------------------------------------------------------


def test_manifest_schema_changes_bump_the_version():
    digest = hashlib.sha256(MANIFEST_SCHEMA.read_bytes()).hexdigest()
    assert MANIFEST_SCHEMA_VERSION in KNOWN, (
        f"MANIFEST_SCHEMA_VERSION {MANIFEST_SCHEMA_VERSION!r} has no known hash: add "
        f"{MANIFEST_SCHEMA_VERSION!r}: {digest!r} to KNOWN in tests/test_manifest.py"
    )
    assert digest == KNOWN[MANIFEST_SCHEMA_VERSION], (
        "compiler/manifest.schema.json changed but MANIFEST_SCHEMA_VERSION did not. If the manifest's shape "
        "changed, bump MANIFEST_SCHEMA_VERSION in compiler/manifest.py (and the schema's `const`), then add "
        f"the new version with hash {digest!r} to KNOWN in tests/test_manifest.py; keep the old entries."
    )


def test_the_version_constant_matches_the_schema():
    const = manifest_schema()["properties"]["metadata"]["properties"]["manifest_schema_version"]["const"]
    assert const == MANIFEST_SCHEMA_VERSION == manifest_module.MANIFEST_SCHEMA_VERSION


# --- the JSON Schemas --------------------------------------------------------------------------------------


def _schemas() -> dict[str, dict]:
    files = sorted(PROJECT_SCHEMAS.glob("*.schema.json"))
    assert {p.name for p in files} >= {
        "defs.schema.json",
        "project.schema.json",
        "feeds.schema.json",
        "sinks.schema.json",
    }
    return {p.name: json.loads(p.read_text(encoding="utf-8")) for p in files}


def _registry(schemas: dict[str, dict]) -> Registry:
    return Registry().with_resources((name, Resource.from_contents(s)) for name, s in schemas.items())


def _walk(node, pointer: str = "#"):
    """Every (JSON pointer, subschema) in a schema document."""
    yield pointer, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _walk(value, f"{pointer}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _walk(value, f"{pointer}/{i}")


@pytest.mark.parametrize(
    "path", [*sorted(PROJECT_SCHEMAS.glob("*.schema.json")), MANIFEST_SCHEMA], ids=lambda p: p.name
)
def test_schemas_are_valid_draft_2020_12(path):
    schema = json.loads(path.read_text(encoding="utf-8"))
    assert schema.get("$schema") == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(schema)


def test_every_ref_resolves():
    schemas = _schemas()
    registry = _registry(schemas)
    for name, schema in schemas.items():
        resolver = registry.resolver(base_uri=name)
        for pointer, node in _walk(schema):
            if isinstance(node, dict) and isinstance(node.get("$ref"), str):
                resolver.lookup(node["$ref"])  # raises when the target is missing


_MAPS = ("properties", "patternProperties", "$defs", "dependentSchemas")
_ONE = (
    "additionalProperties",
    "items",
    "contains",
    "not",
    "if",
    "then",
    "else",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
)
_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")


def _properties(schema, pointer: str = "#"):
    """(pointer, property subschema) for every entry of every `properties` in a schema, recursively."""
    if not isinstance(schema, dict):
        return
    for keyword in _MAPS:
        for key, sub in (schema.get(keyword) or {}).items():
            if keyword == "properties":
                yield f"{pointer}/properties/{key}", sub
            yield from _properties(sub, f"{pointer}/{keyword}/{key}")
    for keyword in _ONE:
        yield from _properties(schema.get(keyword), f"{pointer}/{keyword}")
    for keyword in _LISTS:
        for i, sub in enumerate(schema.get(keyword) or []):
            yield from _properties(sub, f"{pointer}/{keyword}/{i}")


def _description(node, name: str, registry: Registry) -> str:
    """A property's description, or that of the schema its `$ref` points at."""
    if not isinstance(node, dict):
        return ""
    if isinstance(node.get("description"), str):
        return node["description"]
    if isinstance(node.get("$ref"), str):
        target = registry.resolver(base_uri=name).lookup(node["$ref"]).contents
        return target.get("description", "") if isinstance(target, dict) else ""
    return ""


def _undescribed(schemas: dict[str, dict]) -> list[str]:
    registry = _registry(schemas)
    return [
        f"{name}{pointer[1:]}"
        for name, schema in schemas.items()
        for pointer, sub in _properties(schema)
        if not _description(sub, name, registry).strip()
    ]


@pytest.mark.parametrize("which", ["project", "manifest"])
def test_every_property_has_a_description(which):
    """Editors show these descriptions on hover (`# yaml-language-server: $schema=...`)."""
    if which == "project":
        schemas = _schemas()
    else:
        schemas = {"manifest.schema.json": json.loads(MANIFEST_SCHEMA.read_text(encoding="utf-8"))}
    missing = _undescribed(schemas)
    assert not missing, "properties without a description:\n" + "\n".join(missing)


def test_the_description_check_finds_what_is_missing():
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$defs": {
            "d": {"description": "via ref"},
            "x": {
                "type": "object",
                "properties": {
                    "deep": {
                        "oneOf": [{"type": "object", "properties": {"hidden": {"type": "string"}}}],
                        "description": "d",
                    }
                },
            },
        },
        "properties": {
            "a": {"type": "string"},
            "b": {"$ref": "#/$defs/d"},
            "properties": {
                "type": "object",
                "description": "named properties",
                "properties": {"c": {"type": "integer"}},
            },
        },
    }
    assert sorted(_undescribed({"s.json": schema})) == [
        "s.json/$defs/x/properties/deep/oneOf/0/properties/hidden",
        "s.json/properties/a",
        "s.json/properties/properties/properties/c",
    ]


def test_compile_writes_the_schemas_for_editors(init_project):
    compile_and_read(init_project)
    for name, schema in _schemas().items():
        assert json.loads((init_project / "target" / "schemas" / name).read_text()) == schema
