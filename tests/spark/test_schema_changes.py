"""A column added to a table a feed reads (a nullable column without a value for existing rows: no schema
change event under `schema_change_events: default`): rows of versions before the change are emitted without
it, rows after with it, never in one file (the schema id in the file name changes with the schema), and
`feedctl verify` is clean, with and without a CDC query."""

from __future__ import annotations

from deltalake import DeltaTable
from deltalake.schema import Field

from support.e2e import (
    Table,
    assert_verified,
    file_sink,
    messages,
    read_sink,
    run,
    sink_dir,
    write_feeds,
    write_project,
)


def test_a_nullable_column_added_mid_stream_splits_batches_and_files_by_schema(tmp_path):
    t = Table(
        tmp_path / "data" / "t",
        {"id": "int64", "name": "string"},
        ["id"],
        [{"id": i, "name": f"n{i}"} for i in range(1, 6)],
    )
    options = {"updated": True, "resolved": "0s", "min_checkpoint_frequency": "0s"}
    root = write_project(
        tmp_path / "p",
        {"t": {"path": str(t.path), "primary_key": ["id"], "spans": 2}},
        [
            {"name": "all", "tables": ["s.t"], "sink": "all", "options": {**options, "diff": True}},
            {"name": "q", "query": "q.sql", "sink": "q", "options": {**options, "envelope": "wrapped"}},
        ],
        [file_sink("all"), file_sink("q")],
        files={"feeds/q.sql": "SELECT * FROM {{ source('s', 't') }} WHERE id < 9\n"},
    )
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


def _overwrite_with_schema(t: Table, rows: list[dict]) -> int:
    """A commit that changes the table's schema and rewrites its rows (how a column gets a value for existing
    rows, or is dropped, in a table without column mapping)."""
    import pyarrow as pa
    from deltalake import write_deltalake

    write_deltalake(str(t.path), pa.Table.from_pylist(rows), mode="overwrite", schema_mode="overwrite")
    return t.version


def _at(messages: list[dict], ts: str) -> dict[int, dict | None]:
    return {m["key"][0]: m["after"] for m in messages if m["updated"] == ts}


def test_schema_change_events_and_policies(tmp_path):
    """One table through three schema changes — a column added with a value for every row (an overwrite
    that also changes, deletes and inserts rows), a nullable column added without one, a column dropped —
    read by feeds with each policy: backfill (JSON, Parquet, Avro), nobackfill (JSON, Parquet), backfill on
    every column change, and stop (JSON, Avro), continued by new jobs from the timestamps it stops at; and by
    a CDC query that reads the dropped column."""
    t = Table(
        tmp_path / "data" / "t",
        {"id": "int64", "name": "string"},
        ["id"],
        [{"id": i, "name": f"n{i}"} for i in range(1, 6)],
    )
    base = {"updated": True, "resolved": "0s", "min_checkpoint_frequency": "0s"}
    feeds = {
        "bf": {},
        "nb": {"schema_change_policy": "nobackfill"},
        "st": {"schema_change_policy": "stop"},
        "cc": {"schema_change_events": "column_changes"},
        "pq": {"format": "parquet"},
        "av": {"format": "avro"},
        "pq_nb": {"format": "parquet", "schema_change_policy": "nobackfill"},
        "av_st": {"format": "avro", "schema_change_policy": "stop"},
    }
    # a query that reads name, not tier
    query = {"name": "qn", "query": "qn.sql", "sink": "qn", "options": {**base, "envelope": "wrapped"}}
    root = write_project(
        tmp_path / "p",
        {"t": {"path": str(t.path), "primary_key": ["id"], "spans": 2}},
        [*({"name": n, "tables": ["s.t"], "sink": n, "options": {**base, **o}} for n, o in feeds.items()), query],
        [file_sink(n) for n in [*feeds, "qn"]],
        files={"feeds/qn.sql": "SELECT id,\n  name FROM {{ source('s', 't') }}\n"},
    )
    run(root)
    t.update("id = 1", name="'x'")
    at_change = {
        i: {"id": i, "name": "B" if i == 2 else "x" if i == 1 else f"n{i}", "tier": "basic"} for i in (1, 2, 4, 5, 9)
    }
    _overwrite_with_schema(t, list(at_change.values()))  # a column with a value; 2 changed, 3 deleted, 9 inserted
    t.update("id = 4", tier="'gold'")
    DeltaTable(str(t.path)).alter.add_columns([Field("note", "string", nullable=True)])
    t.update("id = 5", note="'hi'")
    _overwrite_with_schema(t, [{k: v for k, v in row.items() if k != "name"} for row in t.snapshot(t.version).values()])
    t.append([{"id": 10, "tier": "new", "note": None}])
    reports = run(root)

    stamps = {}
    for m in messages(root, "bf"):
        stamps.setdefault(m["updated"], set()).add(m["key"][0])
    changes = sorted(stamps)  # the timestamps of the versions, in order: scan, 1, filled, 4-gold, ...
    at_filled, at_dropped = changes[2], changes[-2]
    bf, nb, cc = (messages(root, f) for f in ("bf", "nb", "cc"))
    # backfill: every row at the change, with the new column, and the change's deletes: one message a key
    assert sorted(m["key"][0] for m in bf if m["updated"] == at_filled) == [1, 2, 3, 4, 5, 9]
    assert _at(bf, at_filled) == {**at_change, 3: None}
    assert set(_at(bf, at_dropped)) == {1, 2, 4, 5, 9}
    assert all("name" not in after for after in _at(bf, at_dropped).values())
    # nobackfill: only what the overwrite changed besides the schema (id 1 was only rewritten)
    assert _at(nb, at_filled) == {2: at_change[2], 3: None, 9: at_change[9]}
    assert _at(nb, at_dropped) == {}
    # a nullable column added without a value: an event for column_changes alone
    at_nullable = [ts for ts in sorted({m["updated"] for m in cc})[1:] if ts not in stamps]  # past its scan
    assert len(at_nullable) == 1 and set(_at(cc, at_nullable[0])) == {1, 2, 4, 5, 9}
    assert all(after["note"] is None for after in _at(cc, at_nullable[0]).values())
    assert reports["bf"].status == "running" and reports["pq"].status == "running"
    assert reports["av_st"].status == "failed" and f"schema change occurred at {at_filled}" in reports["av_st"].error
    # a query that does not read the column added is no event; one that reads the column dropped stops
    # before the drop, naming where it reads it
    assert _at(messages(root, "qn"), at_filled) == {2: {"id": 2, "name": "B"}, 3: None, 9: {"id": 9, "name": "n9"}}
    assert reports["qn"].status == "failed" and "column name dropped" in reports["qn"].error
    assert "reads name (feeds/qn.sql:2:3)" in reports["qn"].error, reports["qn"].error
    assert max(m["updated"] for m in messages(root, "qn")) < at_dropped

    # stop: the job fails once everything up to the change is emitted, naming where a new job takes over
    first = reports["st"]
    assert first.status == "failed" and f"schema change occurred at {at_filled}" in first.error, first.error
    assert "column tier added with a value for existing rows" in first.error
    assert max(m["updated"] for m in messages(root, "st")) == at_filled
    jobs_seen = [first.job_id]
    for stop_at in (at_filled, at_dropped):
        write_feeds(
            root,
            [
                *(
                    {
                        "name": n,
                        "tables": ["s.t"],
                        "sink": n,
                        "options": {**base, **o, **({"cursor": stop_at} if n == "st" else {})},
                    }
                    for n, o in feeds.items()
                ),
                query,
            ],
        )
        report = run(root, "st", new_job=True)["st"]
        jobs_seen.append(report.job_id)
        if stop_at == at_filled:  # the new job goes on to the next change, the drop
            assert report.status == "failed" and f"schema change occurred at {at_dropped}" in report.error
            assert "column name dropped" in report.error
    assert report.status == "running" and len(set(jobs_seen)) == 3
    st = messages(root, "st")
    # every change emitted across the three jobs, none lost at the stops (each feed scanned at its job's start)
    assert {(m["key"][0], m["updated"]) for m in st if m["updated"] > min(m["updated"] for m in st)} == {
        (m["key"][0], m["updated"]) for m in nb if m["updated"] > min(m["updated"] for m in nb)
    }

    from feedctl.verify.feed import verify_feed

    for job_id in jobs_seen:
        report = verify_feed(root, "st", job_id)
        assert report.ok, "\n".join(report.lines())
    assert_verified(root, "bf", "nb", "cc", "pq", "av", "qn", "pq_nb", "av_st")
    for name in ("pq", "av"):  # the files of each schema name it and carry it
        ids = {
            p.name.rsplit("-", 1)[1].split(".")[0]
            for p in sink_dir(root, name).rglob("*")
            if p.is_file() and not p.name.endswith(".RESOLVED")
        }
        assert len(ids) == 4, ids  # the schema before, and after each of the three changes


REGION = {
    "new york": "us-east1",
    "boston": "us-east1",
    "seattle": "us-west1",
    "amsterdam": "europe-west1",
    "rome": "europe-south1",
}


def test_a_table_made_regional_by_row_is_a_schema_change(tmp_path):
    """The seed's conversion: movr.vehicles, keyed by id, gains crdb_region (added and filled by one commit),
    and project.yml then declares the key [crdb_region, id] and region column crdb_region under running jobs.
    Under backfill every row is emitted again under its new key at the conversion's timestamp, under
    nobackfill none is, under stop the job fails there and a new job with its cursor continues; a vehicle
    that moves region afterwards is a delete of its old key and an insert of its new one."""
    from feedctl.commands.status import job_status

    cities = ["new york", "boston", "seattle", "amsterdam", "seattle", "new york"]
    t = Table(
        tmp_path / "data" / "vehicles",
        {"id": "string", "city": "string", "status": "string"},
        ["id"],
        [{"id": f"v{i}", "city": c, "status": "available"} for i, c in enumerate(cities)],
    )
    base = {"updated": True, "resolved": "0s", "min_checkpoint_frequency": "0s"}
    # late: its job passes the conversion before project.yml declares the new key
    feeds = {"bf": {}, "nb": {"schema_change_policy": "nobackfill"}, "st": {"schema_change_policy": "stop"}, "late": {}}

    def project(key: dict):
        table = {"vehicles": {"path": str(t.path), "spans": 2, **key}}
        return write_project(
            tmp_path / "p",
            table,
            [{"name": n, "tables": ["s.vehicles"], "sink": n, "options": {**base, **o}} for n, o in feeds.items()],
            [file_sink(n) for n in feeds],
        )

    root = project({"primary_key": ["id"]})
    run(root)
    t.update("id = 'v1'", status="'in_use'")
    run(root)
    _overwrite_with_schema(t, [{**r, "crdb_region": REGION[r["city"]]} for r in t.snapshot(t.version).values()])
    converted = t.snapshot(t.version)
    run(root, "late")
    regional = {"primary_key": ["crdb_region", "id"], "region_column": "crdb_region"}
    project(regional)
    t.update("id = 'v2'", city="'amsterdam'", crdb_region="'europe-west1'")  # moves region
    t.append([{"id": "v9", "city": "rome", "status": "available", "crdb_region": "europe-south1"}])  # a new region
    reports = run(root)

    bf, nb = messages(root, "bf"), messages(root, "nb")
    at = sorted({m["updated"] for m in bf})
    at_conversion, at_move, at_rome = at[-3:]
    # backfill: every row once under its new key, with its region, at the conversion
    assert sorted(tuple(m["key"]) for m in bf if m["updated"] == at_conversion) == sorted(
        (r["crdb_region"], r["id"]) for r in converted.values()
    )
    assert all(m["after"] == converted[(m["key"][1],)] for m in bf if m["updated"] == at_conversion)
    # a region move: the old key deleted, the new one inserted
    for feed in (bf, nb):
        assert sorted((tuple(m["key"]), m["after"] is None) for m in feed if m["updated"] == at_move) == [
            (("europe-west1", "v2"), False),
            (("us-west1", "v2"), True),
        ]
        assert [tuple(m["key"]) for m in feed if m["updated"] == at_rome] == [("europe-south1", "v9")]
    assert not [m for m in nb if m["updated"] == at_conversion]  # nobackfill: the rows only got a region
    # late: the conversion backfilled under the old key; the new key taken at the next version, backfilled
    late = messages(root, "late")
    assert sorted(tuple(m["key"]) for m in late if m["updated"] == at_conversion) == sorted(converted)
    assert sorted((tuple(m["key"]), m["after"] is None) for m in late if m["updated"] == at_move) == sorted(
        [((r["crdb_region"], r["id"]), False) for r in t.snapshot(t.version - 1).values()]
        + [(("us-west1", "v2"), True)]
    )
    # the table's spans are now a block per region, each homed there
    homes = {s["home"] for s in job_status(root, "bf")["spans"]}
    assert {f"region={r}" for r in REGION.values()} <= homes, homes
    project({"primary_key": ["id"]})  # an older copy of project.yml: refused, never a change back
    stale = run(root, "bf")["bf"]
    assert stale.status == "error" and "declares the key [id] of s.vehicles, which job" in stale.error, stale.error
    project(regional)

    # stop: the job fails at the conversion, naming it and the cursor a new job continues from
    first = reports["st"]
    assert first.status == "failed" and f"schema change occurred at {at_conversion}" in first.error, first.error
    assert "key [id] → [crdb_region, id], region column crdb_region" in first.error
    assert f"feedctl run --new-job -s st --cursor '{at_conversion}'" in first.error
    second = run(root, "st", new_job=True, cursor=at_conversion)["st"]
    assert second.status == "running" and second.job_id != first.job_id
    st = messages(root, "st")
    assert {(tuple(m["key"]), m["updated"]) for m in st if m["updated"] > min(m["updated"] for m in st)} == {
        (tuple(m["key"]), m["updated"]) for m in nb if m["updated"] > min(m["updated"] for m in nb)
    }

    from feedctl.verify.feed import verify_feed

    for job_id in (first.job_id, second.job_id):
        report = verify_feed(root, "st", job_id)
        assert report.ok, "\n".join(report.lines())
    assert_verified(root, "bf", "nb", "late")
