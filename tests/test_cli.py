"""The `feedctl` command as a user types it: every command, every exit code, no tracebacks, no secrets.

Exit codes: 0 success; 1 the project has errors (each with code, file, line and column); 2 bad usage.
Tests match codes, exit codes and locations, never message wording.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Cli, json_lines

import feedctl

TRACEBACK = "Traceback (most recent call last)"
DEMO_FEEDS = {"movr_all", "vehicles_in_use", "ride_ends"}
DEMO_TABLES = ["movr.users", "movr.vehicles", "movr.rides"]
HAS_JAVA = bool(os.environ.get("JAVA_HOME") and (Path(os.environ["JAVA_HOME"]) / "bin/java").exists()
                or shutil.which("java"))


def assert_clean(result) -> None:
    """No traceback anywhere in what the user sees."""
    for text in (result.stdout, result.stderr):
        assert TRACEBACK not in text, text


def diagnostics(result) -> list[dict]:
    """The diagnostics of a `--log-format json` run (on stderr)."""
    return [d for d in json_lines(result.stderr) if d.get("event") == "diagnostic"]


def manifest(project: Path) -> dict:
    return json.loads((project / "target" / "manifest.json").read_text(encoding="utf-8"))


def set_line(path: Path, prefix: str, new: str) -> None:
    """Replace the first line of `path` starting with `prefix`."""
    lines = path.read_text(encoding="utf-8").splitlines()
    hits = [i for i, line in enumerate(lines) if line.startswith(prefix)]
    assert hits, (prefix, lines)
    lines[hits[0]] = new
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def feedctl_script() -> Path:
    script = Path(sys.executable).parent / "feedctl"
    return script if script.exists() else Path(shutil.which("feedctl"))


@pytest.fixture
def init_project(tmp_path) -> Path:
    """A project made by `feedctl init`, with its sample Delta table."""
    root = tmp_path / "shop_feeds"
    result = Cli()("init", str(root))
    assert result.exit_code == 0, result.output
    return root


# --- init ----------------------------------------------------------------------------------------------

def test_init_then_compile(tmp_path):
    root = tmp_path / "new_project"
    result = Cli()("init", str(root))
    assert result.exit_code == 0, result.output
    assert_clean(result)
    assert (root / "project.yml").is_file()

    result = Cli(root)("compile")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""  # no warnings: the sample table exists and the query is clean
    target = root / "target"
    assert (target / "manifest.json").is_file()
    assert (target / "compiled" / "large_orders.sql").is_file()
    assert "FROM" in (target / "compiled" / "large_orders.sql").read_text()
    schemas = {p.name for p in (target / "schemas").glob("*.json")}
    assert schemas == {"defs.schema.json", "project.schema.json", "feeds.schema.json", "sinks.schema.json"}
    package = Path(feedctl.__file__).parent / "project" / "schemas"
    for name in schemas:
        assert (target / "schemas" / name).read_text() == (package / name).read_text()
    assert set(manifest(root)["feeds"]) == {"orders", "large_orders"}


def test_init_refuses_an_existing_project(init_project):
    project_yml = init_project / "project.yml"
    project_yml.write_text(project_yml.read_text() + "# my edit\n", encoding="utf-8")
    result = Cli()("init", str(init_project))
    assert result.exit_code == 2
    assert result.stderr.strip()
    assert_clean(result)
    assert project_yml.read_text().endswith("# my edit\n")  # nothing overwritten


def test_init_into_a_file_is_a_usage_error(tmp_path):
    path = tmp_path / "a_file"
    path.write_text("x")
    result = Cli()("init", str(path))
    assert result.exit_code == 2
    assert_clean(result)


# --- compile and selectors -----------------------------------------------------------------------------

def test_compile_demo(demo_project):
    result = Cli(demo_project)("compile")
    assert result.exit_code == 0, result.output
    assert_clean(result)
    m = manifest(demo_project)
    assert set(m["feeds"]) == DEMO_FEEDS
    assert m["metadata"]["selectors"] == []
    assert {p.name for p in (demo_project / "target" / "compiled").glob("*.sql")} == {
        "vehicles_in_use.sql", "ride_ends.sql"}


def test_compile_demo_warns_about_missing_tables(demo_project):
    """The demo's tables are created by `workload init`: before that, compile succeeds with FC521 warnings."""
    result = Cli(demo_project)("compile", json_logs=True)
    assert result.exit_code == 0, result.output
    found = diagnostics(result)
    assert {d["code"] for d in found} == {"FC521"}
    assert {d["severity"] for d in found} == {"warning"}
    assert all(d["file"] == "project.yml" and d["line"] > 0 and d["column"] > 0 for d in found)


@pytest.mark.parametrize("selectors, expected", [
    (["vehicles_in_use"], {"vehicles_in_use"}),
    (["tag:dispatch"], {"vehicles_in_use"}),
    (["tag:archive"], {"movr_all"}),
    (["tag:movr"], DEMO_FEEDS),
    (["table:movr.rides"], {"movr_all", "ride_ends"}),
    (["table:movr.vehicles"], {"movr_all", "vehicles_in_use"}),
    (["table:movr.users"], {"movr_all"}),
    (["sink:warehouse_files"], {"movr_all"}),
    (["sink:ride_events"], {"ride_ends"}),
    (["sink:dispatch"], {"vehicles_in_use"}),
    (["ride_ends", "sink:dispatch"], {"ride_ends", "vehicles_in_use"}),
])
def test_compile_selects(demo_project, selectors, expected):
    args = [a for s in selectors for a in ("-s", s)]
    result = Cli(demo_project)("compile", *args)
    assert result.exit_code == 0, result.output
    m = manifest(demo_project)
    assert set(m["feeds"]) == expected
    assert m["metadata"]["selectors"] == selectors

    listed = Cli(demo_project)("ls", *args, json_logs=True)
    assert listed.exit_code == 0, listed.output
    assert {r["name"] for r in json_lines(listed.stdout)} == expected


@pytest.mark.parametrize("selector, code, suggestion", [
    ("movr_al", "FC601", "movr_all"),
    ("tag:movrr", "FC602", "movr"),
    ("table:movr.vehicle", "FC602", "movr.vehicles"),
    ("sink:dispatc", "FC602", "dispatch"),
])
@pytest.mark.parametrize("command", ["compile", "ls"])
def test_selector_matching_nothing(demo_project, command, selector, code, suggestion):
    result = Cli(demo_project)(command, "-s", selector, json_logs=True)
    assert result.exit_code == 1
    assert_clean(result)
    errors = [d for d in diagnostics(result) if d["severity"] == "error"]
    assert [d["code"] for d in errors] == [code]
    assert f'"{suggestion}"' in errors[0]["hint"]
    assert not (demo_project / "target" / "manifest.json").exists()

    text = Cli(demo_project)(command, "-s", selector)
    assert text.exit_code == 1
    assert code in text.stderr and suggestion in text.stderr
    assert_clean(text)


def test_one_bad_selector_among_good_ones_fails(demo_project):
    result = Cli(demo_project)("compile", "-s", "ride_ends", "-s", "nope", json_logs=True)
    assert result.exit_code == 1
    assert [d["code"] for d in diagnostics(result) if d["severity"] == "error"] == ["FC601"]


@pytest.mark.parametrize("selector", ["foo:bar", "tag:", "tags:movr", ":x"])
@pytest.mark.parametrize("command", ["compile", "ls"])
def test_malformed_selector_is_a_usage_error(demo_project, command, selector):
    for json_logs in (False, True):
        result = Cli(demo_project)(command, "-s", selector, json_logs=json_logs)
        assert result.exit_code == 2, result.output
        assert result.stderr.strip()
        assert_clean(result)
    assert not (demo_project / "target").exists()


def test_vars_change_the_compiled_sql(demo_project):
    compiled = demo_project / "target" / "compiled" / "vehicles_in_use.sql"
    assert Cli(demo_project)("compile").exit_code == 0
    assert re.search(r"current_battery >= 20\b", compiled.read_text())
    assert manifest(demo_project)["project"]["vars"]["min_battery"] == 20

    result = Cli(demo_project)("compile", "--vars", "{min_battery: 55}")
    assert result.exit_code == 0, result.output
    assert re.search(r"current_battery >= 55\b", compiled.read_text())
    assert manifest(demo_project)["project"]["vars"]["min_battery"] == 55


@pytest.mark.parametrize("text", ["not: [valid", "[1, 2]", "just a string", "{a: 1", "'", "null",
                                  "{a: 1, a: 2}"])
@pytest.mark.parametrize("command", ["compile", "ls"])
def test_bad_vars_are_a_usage_error(demo_project, command, text):
    result = Cli(demo_project)(command, "--vars", text)
    assert result.exit_code == 2, result.output
    assert result.stderr.strip()
    assert_clean(result)
    assert not (demo_project / "target").exists()


def test_vars_are_read_like_project_files(init_project):
    """YAML 1.2 booleans and dates as text, as in project.yml: `yes` stays "yes", a date stays a string."""
    result = Cli(init_project)("compile", "--vars", "{since: 2024-01-01, flag: yes, min_amount: 3}")
    assert result.exit_code == 0, result.output
    assert manifest(init_project)["project"]["vars"] == {"since": "2024-01-01", "flag": "yes", "min_amount": 3}
    assert "amount >= 3" in (init_project / "target" / "compiled" / "large_orders.sql").read_text()


# --- ls ------------------------------------------------------------------------------------------------

def test_ls_text(demo_project):
    result = Cli(demo_project)("ls")
    assert result.exit_code == 0, result.output
    assert_clean(result)
    out = result.stdout
    for name in [*DEMO_FEEDS, *DEMO_TABLES, "warehouse_files", "dispatch"]:
        assert name in out, name
    # each feed's row names its sink
    for feed, sink in (("movr_all", "warehouse_files"), ("vehicles_in_use", "dispatch"),
                       ("ride_ends", "ride_events")):
        row = next(line for line in out.splitlines() if f" {feed} " in line)
        assert sink in row


def test_ls_json(demo_project):
    result = Cli(demo_project)("ls", json_logs=True)
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert all(isinstance(r, dict) for r in records)
    by_name = {r["name"]: r for r in records}
    assert len(records) == len(by_name) == 3
    assert by_name["movr_all"]["tables"] == DEMO_TABLES
    assert by_name["movr_all"]["sink"] == "warehouse_files"
    assert by_name["vehicles_in_use"]["tables"] == ["movr.vehicles"]
    assert by_name["vehicles_in_use"]["sink"] == "dispatch"
    assert by_name["vehicles_in_use"]["sink_uri"] == "file://target/sink/dispatch"
    assert by_name["ride_ends"]["tables"] == ["movr.rides"]
    assert by_name["ride_ends"]["sink"] == "ride_events"
    assert by_name["ride_ends"]["file"] == "feeds/movr.yml:26"


def test_ls_writes_nothing(demo_project):
    assert Cli(demo_project)("ls").exit_code == 0
    assert not (demo_project / "target").exists()


# --- debug ---------------------------------------------------------------------------------------------

def checks_of(result) -> dict[str, dict]:
    return {e["check"]: e for e in json_lines(result.stdout) if e.get("event") == "check"}


def test_debug_demo_reports_missing_tables(demo_project):
    result = Cli(demo_project)("debug")
    assert result.exit_code == 1
    assert_clean(result)
    lines = result.stdout.splitlines()
    for table in DEMO_TABLES:
        assert sum(line.startswith("FAIL") and f"table {table}" in line for line in lines) == 1, table
    for name in ("spark", "project", "state store", "sink warehouse_files", "sink dispatch"):
        assert any(line.startswith("OK") and f" {name}:" in line for line in lines), name
    if HAS_JAVA:
        assert any(line.startswith("OK") and " java:" in line for line in lines)

    checks = checks_of(Cli(demo_project)("debug", json_logs=True))
    assert {n for n, c in checks.items() if not c["ok"]} - {"java"} == {f"table {t}" for t in DEMO_TABLES}
    assert checks["state store"]["ok"] and checks["spark"]["ok"]


@pytest.mark.skipif(not HAS_JAVA, reason="the java check needs a JDK")
def test_debug_init_project_passes(init_project):
    result = Cli(init_project)("debug")
    assert result.exit_code == 0, result.output
    assert not any(line.startswith("FAIL") for line in result.stdout.splitlines())
    checks = checks_of(Cli(init_project)("debug", json_logs=True))
    assert set(checks) == {"java", "spark", "project", "state store", "table shop.orders", "sink local_files",
                           "sink large_orders_files"}
    assert all(c["ok"] for c in checks.values())


def test_debug_unwritable_state_store(init_project, tmp_path):
    blocker = tmp_path / "a_regular_file"
    blocker.write_text("not a folder")
    set_line(init_project / "project.yml", "state:", f"state: sqlite:///{blocker}/x/state.db")
    result = Cli(init_project)("debug", json_logs=True)
    assert result.exit_code == 1
    assert_clean(result)
    checks = checks_of(result)
    assert checks["state store"]["ok"] is False
    assert checks["table shop.orders"]["ok"] and checks["sink local_files"]["ok"]

    text = Cli(init_project)("debug")
    assert any(line.startswith("FAIL") and "state store" in line for line in text.stdout.splitlines())


def test_debug_broken_project(init_project):
    set_line(init_project / "sinks" / "local.yml", "  - name:", "  - name: elsewhere")
    result = Cli(init_project)("debug", json_logs=True)
    assert result.exit_code == 1
    assert_clean(result)
    checks = checks_of(result)
    assert checks["project"]["ok"] is False and "FC202" in checks["project"]["detail"]


# --- no project, bad usage -----------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["compile", "ls", "debug"])
@pytest.mark.parametrize("where", ["empty", "missing"])
def test_no_project(tmp_path, command, where):
    project_dir = tmp_path / where
    if where == "empty":
        project_dir.mkdir()
    result = Cli(project_dir)(command, json_logs=True)
    assert result.exit_code == 1
    assert_clean(result)
    if command == "debug":
        checks = checks_of(result)
        assert checks["project"]["ok"] is False and "FC001" in checks["project"]["detail"]
    else:
        assert [d["code"] for d in diagnostics(result)] == ["FC001"]
        text = Cli(project_dir)(command)
        assert text.exit_code == 1 and "FC001" in text.stderr
        assert_clean(text)
    assert not project_dir.exists() or not (project_dir / "target").exists()


def test_no_project_in_the_current_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FEEDCTL_PROJECT_DIR", raising=False)
    result = Cli()("compile", json_logs=True)
    assert result.exit_code == 1
    assert [d["code"] for d in diagnostics(result)] == ["FC001"]


def test_project_dir_from_the_environment(init_project, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FEEDCTL_PROJECT_DIR", str(init_project))
    assert Cli()("compile").exit_code == 0
    assert (init_project / "target" / "manifest.json").is_file()


@pytest.mark.parametrize("argv", [
    ["bogus"],
    ["--bogus", "compile"],
    ["compile", "--bogus"],
    ["ls", "extra-argument"],
    ["compile", "-s"],
    ["--log-format", "xml", "compile"],
    ["init"],
    ["debug", "--vars", "{a: 1}"],
])
def test_bad_usage_exits_2(demo_project, argv):
    result = Cli(demo_project)(*argv)
    assert result.exit_code == 2, result.output
    assert result.stderr.strip()
    assert_clean(result)


def test_project_dir_that_is_a_file(tmp_path):
    path = tmp_path / "project.yml"
    path.write_text("name: x\n")
    result = Cli(path)("compile")
    assert result.exit_code == 2
    assert_clean(result)


def test_version():
    result = Cli()("--version")
    assert result.exit_code == 0
    assert feedctl.__version__ in result.stdout


def test_help():
    result = Cli()("--help")
    assert result.exit_code == 0
    for command in ("init", "compile", "ls", "debug"):
        assert command in result.stdout


# --- diagnostics: JSON and text ------------------------------------------------------------------------

@pytest.fixture
def broken_project(init_project) -> Path:
    """An init project with an unknown sink on line 6, column 11 of feeds/orders.yml."""
    set_line(init_project / "feeds" / "orders.yml", "    sink: local_files", "    sink: local_filez")
    return init_project


def test_json_diagnostics(broken_project):
    result = Cli(broken_project)("compile", json_logs=True)
    assert result.exit_code == 1
    assert_clean(result)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    objects = [json.loads(line) for line in lines]  # every stderr line is a JSON object
    for d in objects:
        assert {"code", "file", "line", "column", "severity", "message"} <= set(d)
    errors = [d for d in objects if d["severity"] == "error"]
    assert errors and all(d["code"] == "FC202" for d in errors)
    first = min(errors, key=lambda d: d["line"])
    assert (first["file"], first["line"], first["column"]) == ("feeds/orders.yml", 6, 11)
    assert "local_files" in first["hint"]
    assert result.stdout == ""
    assert not (broken_project / "target" / "manifest.json").exists()


def test_text_diagnostics(broken_project):
    result = Cli(broken_project)("compile")
    assert result.exit_code == 1
    assert_clean(result)
    assert re.search(r"^feeds/orders\.yml:6:11: error FC202\b", result.stderr, re.M), result.stderr


def test_sql_error_points_into_the_query_file(init_project):
    query = init_project / "feeds" / "large_orders.sql"
    query.write_text(query.read_text().replace("amount >=", "amout >="), encoding="utf-8")
    result = Cli(init_project)("compile", json_logs=True)
    assert result.exit_code == 1
    [error] = [d for d in diagnostics(result) if d["severity"] == "error"]
    assert (error["code"], error["file"], error["line"], error["column"]) == (
        "FC518", "feeds/large_orders.sql", 3, 7)
    text = Cli(init_project)("compile")
    assert re.search(r"^feeds/large_orders\.sql:3:7: error FC518\b", text.stderr, re.M), text.stderr


def test_yaml_syntax_error(init_project):
    (init_project / "feeds" / "bad.yml").write_text("feeds:\n  - name: x\n    tables: [shop.orders\n")
    for command in ("compile", "ls"):
        result = Cli(init_project)(command, json_logs=True)
        assert result.exit_code == 1
        assert_clean(result)
        [error] = [d for d in diagnostics(result) if d["severity"] == "error"]
        assert error["code"] == "FC003" and error["file"] == "feeds/bad.yml" and error["line"] >= 3


def test_several_errors_in_several_files_are_all_reported(init_project):
    set_line(init_project / "feeds" / "orders.yml", "    sink: local_files", "    sink: nowhere")
    set_line(init_project / "sinks" / "local.yml", "      partition_format:", "      partition_format: weekly")
    result = Cli(init_project)("compile", json_logs=True)
    assert result.exit_code == 1
    found = {(d["code"], d["file"], d["line"]) for d in diagnostics(result) if d["severity"] == "error"}
    assert ("FC202", "feeds/orders.yml", 6) in found
    assert ("FC104", "sinks/local.yml", 7) in found


# --- unexpected errors ---------------------------------------------------------------------------------

def test_internal_error_without_debug_is_short(demo_project):
    (demo_project / "target").write_text("a file where the target folder should be")
    result = Cli(demo_project)("compile")
    assert result.exit_code == 1
    assert_clean(result)
    assert result.stderr.strip()
    assert len(result.stderr.strip().splitlines()) <= 10

    as_json = Cli(demo_project)("compile", json_logs=True)
    assert as_json.exit_code == 1
    assert "error" in [e.get("event") for e in json_lines(as_json.stderr)]


def test_internal_error_with_debug_propagates(demo_project):
    (demo_project / "target").write_text("a file where the target folder should be")
    with pytest.raises(OSError):
        Cli(demo_project)("--debug", "compile")


def test_internal_error_with_debug_prints_a_traceback(demo_project):
    (demo_project / "target").write_text("a file where the target folder should be")
    proc = subprocess.run([str(feedctl_script()), "--project-dir", str(demo_project), "--debug", "compile"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert TRACEBACK in proc.stderr


# --- secrets -------------------------------------------------------------------------------------------

SECRETS = {
    "KAFKA_PASSWORD": "kafka-Pw-7f3a91c2e5",
    "HOOK_TOKEN": "Bearer hook-Tok-4d8e2b6a10",
    "PG_PASSWORD": "pg-Pw-93b7c1e0d4",
    "S3_SECRET_KEY": "s3-Key-5a0c7e9b21",
}


@pytest.fixture
def secret_project(init_project, monkeypatch) -> Path:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    set_line(init_project / "project.yml", "state:",
             "state: \"postgresql+psycopg://feeder:{{ env_var('PG_PASSWORD') }}@127.0.0.1:1/feeds\"")
    set_line(init_project / "project.yml", "    spark.sql.shuffle.partitions:",
             "    spark.sql.shuffle.partitions: \"4\"\n"
             "    spark.hadoop.fs.s3a.secret.key: \"{{ env_var('S3_SECRET_KEY') }}\"")
    sinks = init_project / "sinks" / "local.yml"
    sinks.write_text(sinks.read_text() + (
        "  - name: events\n"
        "    uri: \"kafka://broker:9092?sasl_password={{ env_var('KAFKA_PASSWORD') }}&sasl_user=u\"\n"
        "  - name: hook\n"
        "    uri: webhook-https://hooks.example.com/feed\n"
        "    options:\n"
        "      webhook_auth_header: \"{{ env_var('HOOK_TOKEN') }}\"\n"), encoding="utf-8")
    feeds = init_project / "feeds" / "orders.yml"
    feeds.write_text(feeds.read_text() + (
        "  - name: orders_to_kafka\n"
        "    tables: [shop.orders]\n"
        "    sink: events\n"
        "  - name: orders_to_hook\n"
        "    tables: [shop.orders]\n"
        "    sink: hook\n"), encoding="utf-8")
    return init_project


def assert_no_secret(text: str, where: str) -> None:
    for value in SECRETS.values():
        assert value not in text, f"secret leaked in {where}"
        assert value.split()[-1] not in text, f"secret leaked in {where}"


def test_secrets_never_leave_memory(secret_project):
    outputs = []
    for args, json_logs in [(("compile",), False), (("compile",), True), (("ls",), False), (("ls",), True),
                            (("debug",), False), (("debug",), True)]:
        result = Cli(secret_project)(*args, json_logs=json_logs)
        expected = {"compile": 0, "ls": 0, "debug": 1}[args[0]]  # debug: no Kafka client, no Postgres
        assert result.exit_code == expected, result.output
        outputs.append((f"{args} json={json_logs}", result.stdout + result.stderr))
    for where, text in outputs:
        assert_no_secret(text, where)

    files = [p for p in (secret_project / "target").rglob("*") if p.is_file()]
    assert any(p.name == "manifest.json" for p in files)
    for path in files:
        data = path.read_bytes()
        for value in SECRETS.values():
            assert value.encode() not in data, f"secret leaked in {path}"

    m = manifest(secret_project)
    assert set(m["feeds"]) >= {"orders_to_kafka", "orders_to_hook"}
    assert m["sinks"]["events"]["uri"].startswith("kafka://broker:9092")
    assert m["sinks"]["hook"]["options"]["webhook_auth_header"] != SECRETS["HOOK_TOKEN"]
    assert m["project"]["state"].startswith("postgresql+psycopg://feeder:")
    assert m["project"]["spark"]["conf"]["spark.hadoop.fs.s3a.secret.key"] != SECRETS["S3_SECRET_KEY"]


def test_secrets_stay_hidden_when_the_project_has_errors(secret_project):
    set_line(secret_project / "feeds" / "orders.yml", "    sink: events", "    sink: event")
    for json_logs in (False, True):
        result = Cli(secret_project)("compile", json_logs=json_logs)
        assert result.exit_code == 1
        assert_no_secret(result.stdout + result.stderr, f"compile json={json_logs}")


def test_a_secret_changes_the_definition_hash_only_through_its_name(secret_project, monkeypatch):
    """The definition hash is computed from redacted values: rotating a password never restarts a feed."""
    assert Cli(secret_project)("compile").exit_code == 0
    before = {n: f["definition_hash"] for n, f in manifest(secret_project)["feeds"].items()}
    monkeypatch.setenv("KAFKA_PASSWORD", "rotated-0000")
    monkeypatch.setenv("HOOK_TOKEN", "rotated-1111")
    assert Cli(secret_project)("compile").exit_code == 0
    after = {n: f["definition_hash"] for n, f in manifest(secret_project)["feeds"].items()}
    assert before == after


def test_unset_env_var_is_reported(secret_project, monkeypatch):
    monkeypatch.delenv("KAFKA_PASSWORD")
    result = Cli(secret_project)("compile", json_logs=True)
    assert result.exit_code == 1
    unset = [d for d in diagnostics(result) if d["code"] == "FC403"]
    assert [(d["file"], d["line"], d["column"]) for d in unset] == [("sinks/local.yml", 11, 10)]


# --- the installed command; no JVM, no network ---------------------------------------------------------

def test_console_script(init_project):
    proc = subprocess.run([str(feedctl_script()), "--project-dir", str(init_project), "compile"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (init_project / "target" / "manifest.json").is_file()

    proc = subprocess.run([str(feedctl_script()), "--project-dir", str(init_project), "compile", "-s", "nope"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "FC601" in proc.stderr and TRACEBACK not in proc.stderr

    proc = subprocess.run([str(feedctl_script()), "frobnicate"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2


def test_compile_needs_no_java(init_project, tmp_path):
    """compile never starts a JVM: no JAVA_HOME, and a `java` on PATH that records being called."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    marker = tmp_path / "java-was-called"
    java = fake_bin / "java"
    java.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    java.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
    env.update(JAVA_HOME=str(tmp_path / "no-such-jdk"), PATH=str(fake_bin))
    for args in (["compile"], ["ls"], ["--log-format", "json", "compile", "-s", "tag:none"]):
        proc = subprocess.run([str(feedctl_script()), "--project-dir", str(init_project), *args],
                              capture_output=True, text=True, timeout=120, env=env)
        assert proc.returncode == (1 if "tag:none" in args else 0), proc.stderr
        assert TRACEBACK not in proc.stderr
    assert (init_project / "target" / "manifest.json").is_file()
    assert not marker.exists()


_NO_SPARK_PROBE = r"""
import json, socket, subprocess, sys

calls = []
def refuse(name):
    def fail(*args, **kwargs):
        calls.append(name)
        raise OSError(f"{name} is not allowed during compile")
    return fail

socket.socket.connect = refuse("socket.connect")
socket.socket.connect_ex = refuse("socket.connect_ex")
socket.create_connection = refuse("socket.create_connection")
socket.getaddrinfo = refuse("socket.getaddrinfo")
subprocess.Popen.__init__ = refuse("subprocess.Popen")

from feedctl.compiler.compile import compile_project
from feedctl.compiler.manifest import write_target
from feedctl.cli import main

result = compile_project(sys.argv[1])
write_target(result)
try:
    main(["--project-dir", sys.argv[1], "compile"], standalone_mode=False)
    main(["--project-dir", sys.argv[1], "ls"], standalone_mode=False)
except SystemExit as exc:
    assert not exc.code, exc.code
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("pyspark", "py4j", "delta"))
print(json.dumps({"feeds": sorted(result.feeds), "loaded": loaded, "calls": calls}))
"""


@pytest.mark.parametrize("project", ["init", "demo"])
def test_compile_imports_no_spark_and_opens_no_connection(init_project, demo_project, project):
    root = init_project if project == "init" else demo_project
    proc = subprocess.run([sys.executable, "-c", _NO_SPARK_PROBE, str(root)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["feeds"]
    assert report["loaded"] == [], "compile imported Spark"
    assert report["calls"] == [], "compile opened a connection or started a process"


# --- init never overwrites -----------------------------------------------------------------------------

def test_init_never_overwrites_a_users_files(tmp_path):
    root = tmp_path / "existing"
    (root / "feeds").mkdir(parents=True)
    (root / "feeds" / "orders.yml").write_text("my own feeds\n")
    result = Cli()("init", str(root))
    assert result.exit_code == 2
    assert_clean(result)
    assert (root / "feeds" / "orders.yml").read_text() == "my own feeds\n"
    assert not (root / "project.yml").exists()  # refused before writing anything


def test_init_again_after_removing_project_yml(init_project):
    (init_project / "project.yml").unlink()
    result = Cli()("init", str(init_project))
    assert result.exit_code == 2
    assert_clean(result)


def test_init_keeps_an_existing_gitignore(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    (root / ".gitignore").write_text("*.pyc\n")
    assert Cli()("init", str(root)).exit_code == 0
    assert (root / ".gitignore").read_text() == "*.pyc\n"


@pytest.mark.parametrize("dirname", ["My Project-2", "2024 feeds", "___", "Ünïcode"])
def test_init_any_directory_name_compiles(tmp_path, dirname):
    root = tmp_path / dirname
    assert Cli()("init", str(root)).exit_code == 0
    result = Cli(root)("compile")
    assert result.exit_code == 0, result.output
    assert re.fullmatch(r"[a-z_][a-z0-9_]*", manifest(root)["project"]["name"])


def test_init_in_the_current_directory(tmp_path, monkeypatch):
    root = tmp_path / "here"
    root.mkdir()
    monkeypatch.chdir(root)
    monkeypatch.delenv("FEEDCTL_PROJECT_DIR", raising=False)
    assert Cli()("init", ".").exit_code == 0
    assert Cli()("compile").exit_code == 0
    assert manifest(root)["project"]["name"] == "here"


# --- more shapes of projects ---------------------------------------------------------------------------

def test_compile_json_output(init_project):
    result = Cli(init_project)("compile", json_logs=True)
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    [done] = [e for e in events if e["event"] == "compiled"]
    assert done["feeds"] == 2 and done["warnings"] == 0
    assert Path(done["manifest"]) == init_project / "target" / "manifest.json"


def test_ls_shows_users_text_as_it_is(init_project):
    """Descriptions are text, never terminal markup: brackets are printed, not interpreted."""
    set_line(init_project / "feeds" / "orders.yml", "    description: Every change",
             '    description: "Orders [/x] and [bold]loud[/bold] :smile:"')
    result = Cli(init_project)("ls")
    assert result.exit_code == 0, result.output
    assert_clean(result)
    assert "[/x]" in result.stdout and "[bold]loud[/bold]" in result.stdout and ":smile:" in result.stdout


def test_sinkless_and_null_feeds(init_project):
    feeds = init_project / "feeds" / "orders.yml"
    feeds.write_text(feeds.read_text() + (
        "  - name: no_sink\n    tables: [shop.orders]\n"
        "  - name: to_null\n    tables: [shop.orders]\n    sink: nothing\n"), encoding="utf-8")
    sinks = init_project / "sinks" / "local.yml"
    sinks.write_text(sinks.read_text() + '  - name: nothing\n    uri: "null://"\n', encoding="utf-8")
    result = Cli(init_project)("compile")
    assert result.exit_code == 0, result.output
    m = manifest(init_project)
    assert m["feeds"]["no_sink"]["sink"] is None
    assert m["sinks"]["nothing"]["kind"] == "null"
    records = {r["name"]: r for r in json_lines(Cli(init_project)("ls", json_logs=True).stdout)}
    assert records["no_sink"]["sink"] is None and records["no_sink"]["sink_uri"] is None
    assert records["to_null"]["sink"] == "nothing"
    text = Cli(init_project)("ls")
    assert text.exit_code == 0 and "no_sink" in text.stdout
    checks = checks_of(Cli(init_project)("debug", json_logs=True))
    assert checks["sink nothing"]["ok"]


def test_debug_unwritable_file_sink(init_project, tmp_path):
    blocker = tmp_path / "a_regular_file"
    blocker.write_text("not a folder")
    set_line(init_project / "sinks" / "local.yml", "    uri:", f"    uri: file://{blocker}/sink")
    result = Cli(init_project)("debug", json_logs=True)
    assert result.exit_code == 1
    checks = checks_of(result)
    assert checks["sink local_files"]["ok"] is False
    assert checks["state store"]["ok"] and checks["table shop.orders"]["ok"]
