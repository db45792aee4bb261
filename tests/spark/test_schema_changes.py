"""A column added to a table a feed reads (a nullable column without a value for existing rows: no schema
change event under `schema_change_events: default`): rows of versions before the change are emitted without
it, rows after with it, never in one file (the schema id in the file name changes with the schema), and
`feedctl verify` is clean, with and without a CDC query."""

from __future__ import annotations

from deltalake import DeltaTable
from deltalake.schema import Field

from support.e2e import Table, assert_verified, file_sink, read_sink, run, sink_dir, write_project


def test_a_nullable_column_added_mid_stream_splits_batches_and_files_by_schema(tmp_path):
    t = Table(tmp_path / "data" / "t", {"id": "int64", "name": "string"}, ["id"],
              [{"id": i, "name": f"n{i}"} for i in range(1, 6)])
    options = {"updated": True, "resolved": "0s", "min_checkpoint_frequency": "0s"}
    root = write_project(tmp_path / "p", {"t": {"path": str(t.path), "primary_key": ["id"], "spans": 2}},
                         [{"name": "all", "tables": ["s.t"], "sink": "all", "options": {**options, "diff": True}},
                          {"name": "q", "query": "q.sql", "sink": "q", "options": {**options, "envelope": "wrapped"}}],
                         [file_sink("all"), file_sink("q")],
                         files={"feeds/q.sql": "SELECT * FROM {{ source('s', 't') }} WHERE id < 9\n"})
    run(root)
    t.update("id = 1", name="'x'")
    DeltaTable(str(t.path)).alter.add_columns([Field("tier", "string", nullable=True)])
    t.update("id = 2", tier="'gold'")
    t.append([{"id": 3 + 5, "name": "n8", "tier": "silver"}])
    run(root)  # one catch-up over the change

    for sink in ("all", "q"):
        files = [f for f in read_sink(sink_dir(root, sink)) if not f.resolved]
        by_schema: dict[str, set] = {}
        for f in files:
            columns = {tuple(sorted(m["after"])) for m in f.lines}
            assert len(columns) == 1, f"{f.name} mixes schemas: {columns}"
            by_schema.setdefault(f.base.split(".ndjson")[0].rsplit("-", 1)[1], set()).update(columns)
        assert sorted(by_schema.values(), key=len) == [{("id", "name")}, {("id", "name", "tier")}], by_schema
        messages = sorted((m for f in files for m in f.lines), key=lambda m: m["updated"])
        latest = {m["after"]["id"]: m["after"] for m in messages}
        # id 1 changed before the column was added: its message has no `tier`
        assert latest[1] == {"id": 1, "name": "x"} and latest[2]["tier"] == "gold" and latest[8]["tier"] == "silver"
    assert_verified(root, "all", "q")
