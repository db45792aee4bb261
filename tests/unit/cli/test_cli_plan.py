"""`feedctl plan`: each kind of change, compared with the running jobs of a small real project (created by
`feedctl run` at the tables' versions: no Spark starts) and with an earlier build's manifest (`--state`)."""

from __future__ import annotations

import json
import shutil

from support import Cli, write_delta
from support.e2e import file_sink, write_feeds, write_project

QUERY = "SELECT id, region FROM {{ source('s', 'orders') }} WHERE id > 0\n"


def _feeds(**changed) -> list[dict]:
    base = {
        "same": {"tables": ["s.orders"], "sink": "same"},
        "described": {"tables": ["s.orders"], "sink": "described", "description": "orders"},
        "redefined": {"tables": ["s.orders"], "sink": "redefined"},
        "tuned": {"tables": ["s.orders"], "sink": "tuned", "options": {"diff": False, "resolved": "10s"}},
        "started": {"tables": ["s.orders"], "sink": "started"},
        "queried": {"query": "queried.sql", "sink": "queried"},
        "gone": {"tables": ["s.orders"], "sink": "gone"},
        "regional": {"tables": ["s.vehicles"], "sink": "regional"},
    }
    feeds = {**base, **changed}
    return [
        {
            "name": n,
            **{k: v for k, v in f.items() if k != "options"},
            "options": {"initial_scan": "no", **f.get("options", {})},
        }
        for n, f in feeds.items()
        if f is not None
    ]


def _project(tmp_path):
    tables = {
        "orders": {"path": "target/warehouse/s/orders", "primary_key": ["id"]},
        "vehicles": {"path": "target/warehouse/s/vehicles", "primary_key": ["id"]},
    }
    sinks = [
        file_sink(n)
        for n in ("same", "described", "redefined", "tuned", "started", "queried", "gone", "regional", "added")
    ]
    root = write_project(tmp_path / "p", tables, _feeds(), sinks, files={"feeds/queried.sql": QUERY})
    write_delta(root / "target/warehouse/s/orders", {"id": "int64", "region": "string"}, [{"id": 1, "region": "a"}])
    write_delta(
        root / "target/warehouse/s/vehicles",
        {"id": "int64", "crdb_region": "string"},
        [{"id": 1, "crdb_region": "us-east1"}],
    )
    return root


def _change(root, tmp_path):
    """Every kind of change at once, as a pull request might."""
    write_feeds(
        root,
        _feeds(
            described={"tables": ["s.orders"], "sink": "described", "description": "all orders", "tags": ["finance"]},
            redefined={"tables": ["s.orders"], "sink": "redefined", "options": {"full_table_name": True}},
            tuned={"tables": ["s.orders"], "sink": "tuned", "options": {"diff": True, "resolved": "5s"}},
            started={"tables": ["s.orders"], "sink": "started", "options": {"cursor": "2026-01-01T00:00:00Z"}},
            gone=None,
            added={"tables": ["s.orders"], "sink": "added", "options": {}},
        ),
    )
    (root / "feeds/queried.sql").write_text(QUERY.replace("id > 0", "id > 10"))
    project = (root / "project.yml").read_text()
    (root / "project.yml").write_text(
        project.replace(
            "path: target/warehouse/s/vehicles\n    primary_key:\n    - id",
            "path: target/warehouse/s/vehicles\n    primary_key: [crdb_region, id]\n    region_column: crdb_region",
        )
    )


def test_plan_against_the_running_jobs(tmp_path):
    root = _project(tmp_path)
    cli = Cli(root)
    assert cli("run").exit_code == 0
    ids = {j["feed"]: j["job_id"] for j in map(json.loads, cli("jobs", "--json").stdout.splitlines())}
    result = cli("plan")
    assert result.exit_code == 0 and "8 unchanged" in result.output, result.output

    _change(root, tmp_path)
    result = cli("plan", "--format", "json")
    assert result.exit_code == 0, result.output
    plan = {f["name"]: f for f in json.loads(result.stdout)["feeds"]}
    assert {n: f["change"] for n, f in plan.items()} == {
        "same": "unchanged",
        "described": "metadata",
        "redefined": "new-job",
        "tuned": "in-place",
        "started": "unchanged",
        "queried": "new-job",
        "gone": "removed",
        "regional": "backfill",
        "added": "new",
    }
    assert plan["redefined"]["diff"] == [
        "options.full_table_name: false → true (a new job: topic names, and so file names, would change)"
    ]
    assert plan["redefined"]["job_id"] == ids["redefined"]
    assert plan["redefined"]["action"].startswith(
        "feedctl cancel redefined && feedctl run --new-job --continue -s redefined continues from "
    )
    assert plan["tuned"]["diff"] == ["options.resolved: 10s → 5s", "options.diff: false → true"]
    assert plan["tuned"]["action"] == (
        f"job {ids['tuned']} takes it from its next batch once every node running the "
        "feed has this project (a one-off feedctl run alone: at once); the job keeps "
        "its id and high-water mark"
    )
    assert plan["described"]["diff"] == ["description: orders → all orders", 'tags: [] → ["finance"]']
    assert plan["queried"]["diff"] == [
        "query: changed",
        "-SELECT id, region FROM s.orders WHERE id > 0",
        "+SELECT id, region FROM s.orders WHERE id > 10",
    ]
    assert plan["regional"]["diff"] == ["s.vehicles: key [id] → [crdb_region, id], region column crdb_region"]
    assert "schema_change_policy: backfill" in plan["regional"]["action"]
    assert plan["gone"]["action"] == f"feedctl cancel {ids['gone']}: its job runs on no node"
    assert plan["added"] == {
        "name": "added",
        "change": "new",
        "job_id": None,
        "diff": [],
        "action": "feedctl run creates its job, from now, without a scan",
        "command": "feedctl run",
        "contract": [],
        "breaking": False,
    }

    assert cli("plan", "--fail-on", "new-job").exit_code == 1
    assert cli("plan", "--fail-on", "removed", "-s", "same", "-s", "described").exit_code == 0  # not selected
    text = cli("plan").output
    assert "tuned: in-place (job " in text and "    options.diff: false → true" in text
    assert text.rstrip().endswith("1 new, 2 unchanged, 1 metadata, 1 in-place, 1 backfill, 2 new-job, 1 removed")
    markdown = cli("plan", "--format", "markdown").output
    assert markdown.startswith("**feedctl plan**: 1 new, 2 unchanged")
    assert "| `redefined` | **new-job** |" in markdown and "| `same` |" not in markdown
    # the command alone in code, the prose beside it
    assert "| `feedctl cancel redefined && feedctl run --new-job --continue -s redefined` continues from " in markdown

    # the plan is what run does: the redefined feed is refused, the regional one runs on, the tuned one takes
    # its options in place; then the plan has nothing more for those two
    result = cli("run", "-s", "redefined", "-s", "regional", "-s", "tuned", json_logs=True)
    events = list(map(json.loads, result.stdout.splitlines()))
    done = {e["feed"]: e for e in events if e.get("event") == "feed_done"}
    assert done["redefined"]["status"] == "error" and done["regional"]["status"] == "running"
    assert done["tuned"]["status"] == "running" and done["tuned"]["job_id"] == ids["tuned"]
    changed = [e for e in events if e.get("event") == "options_changed"]
    assert [(e["feed"], e["options"]) for e in changed] == [("tuned", {"resolved": "5s", "diff": True})]
    plan = {f["name"]: f["change"] for f in json.loads(cli("plan", "--format", "json").stdout)["feeds"]}
    assert plan["tuned"] == "unchanged" and plan["described"] == "metadata"


def test_plan_against_an_earlier_build(tmp_path):
    root = _project(tmp_path)
    cli = Cli(root)
    assert cli("compile").exit_code == 0
    state = tmp_path / "prod-artifacts"
    shutil.copytree(root / "target", state)
    _change(root, tmp_path)
    result = cli("plan", "--state", str(state), "--format", "json")
    assert result.exit_code == 0, result.output
    plan = {f["name"]: f for f in json.loads(result.stdout)["feeds"]}
    assert {n: f["change"] for n, f in plan.items()} == {
        "same": "unchanged",
        "described": "metadata",
        "redefined": "new-job",
        "tuned": "in-place",
        "started": "unchanged",
        "queried": "new-job",
        "gone": "removed",
        "regional": "backfill",
        "added": "new",
    }
    assert all(f["job_id"] is None for f in plan.values())

    result = cli("plan", "--state", str(tmp_path / "nowhere"))
    assert result.exit_code == 2 and "manifest.json" in result.output


def test_plan_says_what_reading_each_followed_tables_changes_costs(tmp_path):
    from deltalake import DeltaTable

    tables = {
        "orders": {"path": "target/warehouse/s/orders", "primary_key": ["id"]},
        "strict": {"path": "target/warehouse/s/orders", "primary_key": ["id"], "changes": "cdf"},
        "logged": {"path": "target/warehouse/s/logged", "primary_key": ["id"], "changes": "log"},
    }
    feeds = [{"name": n, "tables": [f"s.{n}"], "sink": "out"} for n in tables]
    root = write_project(tmp_path / "p", tables, feeds, [file_sink("out")])
    columns = {"id": "int64", "region": "string"}
    orders = root / "target/warehouse/s/orders"
    write_delta(orders, columns, [{"id": i, "region": "a"} for i in range(100)], change_data_feed=False)
    DeltaTable(str(orders)).update({"region": "'b'"}, predicate="id = 1")  # rewrites the file of 100 rows
    logged = root / "target/warehouse/s/logged"
    write_delta(logged, columns, [{"id": 1, "region": "a"}])
    DeltaTable(str(logged)).delete("id = 1")  # writes change data, which `changes: log` does not read
    result = Cli(root)("plan")
    assert result.exit_code == 0, result.output
    said = result.stdout.split("changes read:\n")[1].splitlines()
    assert said[0].startswith("    s.logged: changes log, change data feed on; of versions 1..1, 1 from the log (")
    assert said[1].startswith("    s.orders: changes auto, change data feed off; of versions 1..1, 1 from the log (")
    assert said[1].endswith("; 1 rewrote files, read whole)")
    assert (
        said[2]
        == "    s.strict: changes cdf, change data feed off; of versions 1..1, 1 cannot be read (change data feed off)"
    )
    reads = {t["table"]: t["reads"] for t in json.loads(Cli(root)("plan", "--format", "json").stdout)["tables"]}
    assert reads["s.orders"]["rewrites"] == 1 and reads["s.orders"]["log_bytes"] > 0
    assert reads["s.strict"]["unreadable"] == 1 and reads["s.logged"]["from_change_files"] == 0


def test_state_modified_selects_the_feeds_a_change_made_since_the_deployed_build(tmp_path):
    root = _project(tmp_path)
    (root / "macros").mkdir(exist_ok=True)
    (root / "macros" / "m.sql").write_text("{% macro positive(c) %}{{ c }} > 0{% endmacro %}\n")
    (root / "feeds/queried.sql").write_text(
        "SELECT id, region FROM {{ source('s', 'orders') }} WHERE {{ positive('id') }}\n"
    )
    cli = Cli(root)
    assert cli("compile").exit_code == 0
    state = tmp_path / "prod-artifacts"
    shutil.copytree(root / "target", state)

    def selected(*selectors) -> list[str]:
        result = cli("ls", *(a for s in selectors for a in ("-s", s)), "--state", str(state), json_logs=True)
        assert result.exit_code == 0, result.output
        return sorted(r["name"] for r in map(json.loads, result.stdout.splitlines()))

    assert selected("state:modified") == []  # nothing changed: nothing selected, and no error
    # a macro's change selects the feed whose query uses it, and nothing else
    (root / "macros" / "m.sql").write_text("{% macro positive(c) %}{{ c }} >= 1{% endmacro %}\n")
    assert selected("state:modified") == ["queried"]
    # an option, a table's definition in project.yml (every feed reading it), a sink; a new feed
    _change(root, tmp_path)
    assert selected("state:modified") == ["added", "described", "queried", "redefined", "regional", "started", "tuned"]
    project = (root / "project.yml").read_text()
    (root / "project.yml").write_text(
        project.replace("path: target/warehouse/s/orders", "path: target/warehouse/s/orders\n    changes: log")
    )
    assert "same" in selected("state:modified")
    assert selected("state:modified", "tag:finance") == selected("state:modified")  # a union, as other selectors
    result = cli("compile", "-s", "state:modified")
    assert result.exit_code == 2 and "--state DIR" in result.output
    result = cli("ls", "-s", "state:changed", "--state", str(state))
    assert result.exit_code == 2 and "state:modified or state:modified+" in result.output


def test_state_modified_plus_adds_the_feeds_writing_to_a_modified_feeds_sink(tmp_path):
    root = _project(tmp_path)
    feeds = _feeds(described={"tables": ["s.orders"], "sink": "same", "description": "orders"})
    write_feeds(root, feeds)
    cli = Cli(root)
    assert cli("compile").exit_code == 0
    state = tmp_path / "prod-artifacts"
    shutil.copytree(root / "target", state)
    write_feeds(root, _feeds(described={"tables": ["s.orders"], "sink": "same", "description": "all orders"}))
    result = cli("plan", "-s", "state:modified+", "--state", str(state), "--format", "json")
    assert result.exit_code == 0, result.output
    assert sorted(f["name"] for f in json.loads(result.stdout)["feeds"]) == ["described", "same"]


def test_a_table_schema_change_frozen_in_a_pull_request_is_said_feed_by_feed(tmp_path):
    """CI cannot open the tables: compile reads `schemas.yml`. A pull request that freezes a table's new
    schema shows, in `plan --state`, what the change will do to each feed's job under its policy."""
    import yaml

    tables = {"orders": {"path": "target/warehouse/s/orders", "primary_key": ["id"]}}
    feeds = [
        {"name": "plain", "tables": ["s.orders"], "sink": "out"},
        {"name": "stopping", "tables": ["s.orders"], "sink": "out", "options": {"schema_change_policy": "stop"}},
        {"name": "queried", "query": "queried.sql", "sink": "out"},
        {"name": "keyed", "query": "keyed.sql", "sink": "out"},
    ]
    files = {
        "feeds/queried.sql": "SELECT id, region FROM {{ source('s', 'orders') }}\n",
        "feeds/keyed.sql": "SELECT id FROM {{ source('s', 'orders') }}\n",
    }
    root = write_project(tmp_path / "p", tables, feeds, [file_sink("out")], files=files)
    write_delta(root / "target/warehouse/s/orders", {"id": "int64", "region": "string"}, [{"id": 1, "region": "a"}])
    cli = Cli(root)
    assert cli("schemas", "freeze").exit_code == 0
    assert cli("compile").exit_code == 0
    state = tmp_path / "prod-artifacts"
    shutil.copytree(root / "target", state)

    frozen = yaml.safe_load((root / "schemas.yml").read_text())
    frozen["tables"][0]["columns"] = [{"name": "id", "type": "long"}, {"name": "note", "type": "string"}]
    (root / "schemas.yml").write_text(yaml.safe_dump(frozen))  # region dropped, note added
    shutil.rmtree(root / "target/warehouse")  # as in CI: the table out of reach
    result = cli("plan", "--state", str(state), "--format", "json")
    assert result.exit_code == 0, result.output
    plan = {f["name"]: f for f in json.loads(result.stdout)["feeds"]}
    said = "s.orders schema: column note added, column region dropped"
    assert plan["plain"]["change"] == "backfill" and f"{said} → backfill" in plan["plain"]["diff"][0]
    assert plan["stopping"]["change"] == "new-job" and f"{said} → stop" in plan["stopping"]["diff"][0]
    assert plan["queried"]["change"] == "new-job" and f"{said} → fail" in plan["queried"]["diff"][0]
    assert plan["keyed"]["change"] == "unchanged" and f"{said} → none" in plan["keyed"]["diff"][0]
    # and what it does to the messages' contract
    assert "breaking: s.orders: field region removed" in plan["plain"]["contract"]
    assert "s.orders: field note added" in plan["plain"]["contract"]


def test_a_backfill_the_table_change_brings_is_sized_where_the_table_can_be_read(tmp_path):
    import pyarrow as pa
    from deltalake import write_deltalake

    tables = {"orders": {"path": "target/warehouse/s/orders", "primary_key": ["id"]}}
    root = write_project(
        tmp_path / "p", tables, [{"name": "plain", "tables": ["s.orders"], "sink": "out"}], [file_sink("out")]
    )
    rows = [{"id": i, "region": "eu"} for i in range(3)]
    path = write_delta(root / "target/warehouse/s/orders", {"id": "int64", "region": "string"}, rows)
    cli = Cli(root)
    assert cli("compile").exit_code == 0
    state = tmp_path / "prod-artifacts"
    shutil.copytree(root / "target", state)
    # the table rewritten without region, under the deployed build's feeds
    write_deltalake(str(path), pa.table({"id": [0, 1, 2, 3]}), mode="overwrite", schema_mode="overwrite")
    result = cli("plan", "--state", str(state), "--format", "json")
    [plain] = json.loads(result.stdout)["feeds"]
    assert plain["change"] == "backfill"
    assert plain["diff"] == [
        "s.orders schema: column region dropped → backfill: every row of the table emitted again at the change "
        "(about 4 rows now)"
    ]


def test_a_breaking_change_of_an_enforced_contract_fails_the_plan_until_its_version_rises(tmp_path):
    tables = {"orders": {"path": "target/warehouse/s/orders", "primary_key": ["id"]}}

    def feeds(version: int = 1, loose_options: dict | None = None) -> list[dict]:
        return [
            {
                "name": "queried",
                "query": "queried.sql",
                "sink": "out",
                "contract": {"enforced": True},
                "version": version,
            },
            {"name": "loose", "tables": ["s.orders"], "sink": "out", "options": loose_options or {"diff": True}},
        ]

    root = write_project(
        tmp_path / "p",
        tables,
        feeds(),
        [file_sink("out")],
        files={"feeds/queried.sql": "SELECT id, region FROM {{ source('s', 'orders') }}\n"},
    )
    write_delta(root / "target/warehouse/s/orders", {"id": "int64", "region": "string"}, [{"id": 1, "region": "a"}])
    cli = Cli(root)
    assert cli("compile").exit_code == 0
    published = json.loads((root / "target/contracts/queried.json").read_text())
    assert published["tables"]["s.orders"] == {"key": {"id": "long"}, "fields": {"id": "long", "region": "string"}}
    assert published["envelope"] == "bare"  # a CDC query's messages are its rows, as CockroachDB's
    assert published["json_schema"]["properties"]["region"]["x-delta-type"] == "string"
    assert published["location"] == {"uri": "file://target/sink/out", "topics": {"s.orders": "orders"}}
    state = tmp_path / "prod-artifacts"
    shutil.copytree(root / "target", state)

    def plan(*args) -> tuple[int, dict]:
        result = cli("plan", "--state", str(state), "--format", "json", *args)
        return result.exit_code, {f["name"]: f for f in json.loads(result.stdout)["feeds"]} if result.stdout else {}

    # a field removed from an enforced feed's messages: breaking, and the gate fails
    (root / "feeds/queried.sql").write_text("SELECT id FROM {{ source('s', 'orders') }}\n")
    write_feeds(root, feeds(loose_options={"diff": False}))
    code, found = plan("--fail-on", "breaking")
    assert code == 1
    assert found["queried"]["breaking"] and "breaking: s.orders: field region removed" in found["queried"]["contract"]
    assert not found["loose"]["breaking"]  # not enforced: said, not held
    assert "breaking: before no longer in the messages" in found["loose"]["contract"]
    text = cli("plan", "--state", str(state)).output
    assert "contract: breaking: s.orders: field region removed" in text and "raise the feed's version" in text
    # the version raised: the change is versioned, and the gate passes
    write_feeds(root, feeds(version=2, loose_options={"diff": False}))
    code, found = plan("--fail-on", "breaking", "--fail-on", "new-job")
    assert code == 0 and "version 1 → 2" in found["queried"]["contract"] and not found["queried"]["breaking"]
    # a new version is a job of its own into a location of its own, beside the old version's, not a new job
    queried = found["queried"]
    assert queried["change"] == "new-version" and queried["diff"][:2] == ["version: 1 → 2", "query: changed"]
    assert queried["action"].startswith("feedctl run creates a job of version 2 into file://target/sink/out/v2, ")
    assert (
        "the job of version 1 runs on into" in queried["action"] and "`feedctl cancel queried@v1`" in queried["action"]
    )
    assert plan("--fail-on", "new-version")[0] == 1
    assert cli("compile").exit_code == 0  # its consumers are told where version 2 is
    published = json.loads((root / "target/contracts/queried.json").read_text())
    assert (published["version"], published["location"]["uri"]) == (2, "file://target/sink/out/v2")
    # a field added is no breaking change
    (root / "feeds/queried.sql").write_text("SELECT id, region, 1 AS one FROM {{ source('s', 'orders') }}\n")
    write_feeds(root, feeds())
    code, found = plan("--fail-on", "breaking")
    assert code == 0 and found["queried"]["contract"] == ["s.orders: field one added"]
