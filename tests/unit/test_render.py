"""Rendering and checking CDC queries through `compile_project`, on small real projects in tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest

from feedctl.compiler.compile import compile_project
from feedctl.diagnostics import ProjectError
from support import write_delta, write_files

PROJECT = """\
name: shop
config-version: 1
sources:
  - name: shop
    tables:
      - name: orders
        path: data/orders
        primary_key: [id]
      - name: customers
        path: data/customers
        primary_key: [region, id]
vars:
  min_amount: 10
  currency: EUR
"""

SINKS = """\
sinks:
  - name: files
    uri: file://target/sink/files
    options:
      file_size: 16MiB
  - name: other
    uri: file://target/sink/other
"""

ORDERS = {"id": "int64", "amount": "float64", "status": "string", "status_code": "int32", "region": "string"}


def feed_yaml(query: str = "q.sql", name: str = "q", extra: str = "") -> str:
    return f"feeds:\n  - name: {name}\n    query: {query}\n{extra}"


def project(
    tmp_path: Path,
    query: str | None = None,
    files: dict | None = None,
    tables: bool = True,
    partition_by: list[str] | None = None,
) -> Path:
    """A project with one feed `q` on feeds/q.sql (when `query` is given) and the orders table on disk."""
    content = {"project.yml": PROJECT, "sinks/sinks.yml": SINKS}
    if query is not None:
        content["feeds/feeds.yml"] = feed_yaml()
        content["feeds/q.sql"] = query
    content.update(files or {})
    write_files(tmp_path, content)
    if tables:
        write_delta(tmp_path / "data/orders", ORDERS, partition_by=partition_by)
        write_delta(tmp_path / "data/customers", {"region": "string", "id": "int64", "name": "string"})
    return tmp_path


def compile_ok(root: Path, **kw):
    return compile_project(root, **kw)


def errors(root: Path, **kw) -> list:
    with pytest.raises(ProjectError) as info:
        compile_project(root, **kw)
    return [d for d in info.value.diagnostics if d.is_error]


def one_error(root: Path, code: str, **kw):
    found = errors(root, **kw)
    assert [d.code for d in found] == [code], [d.format() for d in found]
    return found[0]


def position(text: str, needle: str, nth: int = 0) -> tuple[int, int]:
    """1-based (line, column) of the nth occurrence of `needle` in `text`."""
    index = -1
    for _ in range(nth + 1):
        index = text.index(needle, index + 1)
    before = text[:index]
    return before.count("\n") + 1, index - (before.rfind("\n") + 1) + 1


# ---------------------------------------------------------------------------------------------- source()


def test_source_renders_the_table(tmp_path):
    root = project(tmp_path, "SELECT id, amount FROM {{ source('shop', 'orders') }}\n")
    feed = compile_ok(root).feeds["q"]
    assert feed.sql == "SELECT id, amount FROM shop.orders\n"
    assert feed.tables == ["shop.orders"]
    assert feed.schema_checked


def test_unknown_source_with_did_you_mean(tmp_path):
    root = project(tmp_path, "SELECT id\nFROM {{ source('shop', 'order') }}\n")
    problem = one_error(root, "FC405")
    assert (problem.file, problem.line) == ("feeds/q.sql", 2)
    assert '"shop.orders"' in problem.hint


def test_unknown_source_name(tmp_path):
    root = project(tmp_path, "SELECT id FROM {{ source('shops', 'orders') }}\n")
    problem = one_error(root, "FC405")
    assert '"shop.orders"' in problem.hint


def test_a_table_not_written_through_source_must_still_be_a_source(tmp_path):
    root = project(tmp_path, "SELECT id FROM shop.orders\n")
    assert compile_ok(root).feeds["q"].tables == ["shop.orders"]
    root = project(tmp_path / "typo", "SELECT id FROM shop.ordrs\n")
    problem = one_error(root, "FC519")
    assert (problem.file, problem.line) == ("feeds/q.sql", 1)
    assert '"shop.orders"' in problem.hint


# ---------------------------------------------------------------------------------------------- macros


def test_macros_are_usable_in_queries(tmp_path):
    root = project(
        tmp_path,
        "SELECT id, {{ bucket('amount') }} AS size FROM {{ source('shop', 'orders') }}\n",
        {
            "macros/buckets.sql": "{% macro bucket(column) -%}\n"
            "CASE WHEN {{ column }} >= 100 THEN 'big' ELSE 'small' END\n"
            "{%- endmacro %}\n",
        },
    )
    sql = compile_ok(root).feeds["q"].sql
    assert "CASE WHEN amount >= 100 THEN 'big' ELSE 'small' END AS size" in sql


def test_macros_in_sub_folders_and_several_files(tmp_path):
    root = project(
        tmp_path,
        "SELECT id FROM {{ source('shop', 'orders') }} WHERE {{ paid() }} AND {{ big() }}\n",
        {
            "macros/a.sql": "{% macro paid() %}status = 'paid'{% endmacro %}",
            "macros/more/b.sql": "{% macro big() %}amount > 100{% endmacro %}",
        },
    )
    assert "WHERE status = 'paid' AND amount > 100" in compile_ok(root).feeds["q"].sql


def test_a_macro_calling_var(tmp_path):
    root = project(
        tmp_path,
        "SELECT id FROM {{ source('shop', 'orders') }} WHERE {{ big_enough() }}\n",
        {
            "macros/m.sql": "{% macro big_enough() %}amount > {{ var('min_amount') }}{% endmacro %}",
        },
    )
    assert "WHERE amount > 10" in compile_ok(root).feeds["q"].sql
    assert "WHERE amount > 99" in compile_ok(root, vars_override={"min_amount": 99}).feeds["q"].sql


def test_a_macro_calling_an_undefined_var(tmp_path):
    root = project(
        tmp_path,
        "SELECT id FROM {{ source('shop', 'orders') }}\nWHERE {{ big_enough() }}\n",
        {
            "macros/m.sql": "{% macro big_enough() %}\namount > {{ var('nope') }}{% endmacro %}",
        },
    )
    problem = one_error(root, "FC404")
    assert problem.file in {"macros/m.sql", "feeds/q.sql"}


def test_macro_file_syntax_error(tmp_path):
    root = project(
        tmp_path,
        "SELECT id FROM {{ source('shop', 'orders') }}\n",
        {
            "macros/bad.sql": "{% macro broken() %}\nSELECT {{ 1 +  }}\n{% endmacro %}\n",
        },
    )
    problem = one_error(root, "FC406")
    assert (problem.file, problem.line) == ("macros/bad.sql", 2)


def test_unknown_macro_is_undefined(tmp_path):
    root = project(tmp_path, "SELECT id FROM {{ source('shop', 'orders') }}\nWHERE {{ no_such_macro() }}\n")
    problem = one_error(root, "FC402")
    assert (problem.file, problem.line) == ("feeds/q.sql", 2)


# ---------------------------------------------------------------------------------------------- var()


def test_var_from_the_project(tmp_path):
    root = project(tmp_path, "SELECT id FROM {{ source('shop', 'orders') }} WHERE amount > {{ var('min_amount') }}\n")
    assert compile_ok(root).feeds["q"].sql.endswith("WHERE amount > 10\n")


def test_var_default(tmp_path):
    root = project(tmp_path, "SELECT id FROM {{ source('shop', 'orders') }} WHERE amount > {{ var('cap', 5) }}\n")
    assert compile_ok(root).feeds["q"].sql.endswith("WHERE amount > 5\n")


def test_var_default_does_not_hide_a_defined_var(tmp_path):
    root = project(
        tmp_path, "SELECT id FROM {{ source('shop', 'orders') }} WHERE amount > {{ var('min_amount', 5) }}\n"
    )
    assert compile_ok(root).feeds["q"].sql.endswith("WHERE amount > 10\n")


def test_var_undefined(tmp_path):
    root = project(tmp_path, "SELECT id\nFROM {{ source('shop', 'orders') }}\nWHERE amount > {{ var('min_amout') }}\n")
    problem = one_error(root, "FC404")
    assert (problem.file, problem.line) == ("feeds/q.sql", 3)
    assert '"min_amount"' in problem.hint


def test_vars_override(tmp_path):
    root = project(
        tmp_path,
        "SELECT id FROM {{ source('shop', 'orders') }} WHERE amount > {{ var('min_amount') }} "
        "AND status = '{{ var('wanted') }}'\n",
    )
    result = compile_ok(root, vars_override={"min_amount": 50, "wanted": "paid"})
    assert result.feeds["q"].sql.endswith("WHERE amount > 50 AND status = 'paid'\n")
    assert result.vars["min_amount"] == 50 and result.vars["currency"] == "EUR"


# ---------------------------------------------------------------------------------------------- env_var()


def test_env_var_set(tmp_path, monkeypatch):
    monkeypatch.setenv("FEEDCTL_TEST_STATUS", "shipped")
    root = project(
        tmp_path,
        "SELECT id FROM {{ source('shop', 'orders') }} WHERE status = '{{ env_var('FEEDCTL_TEST_STATUS') }}'\n",
    )
    assert compile_ok(root).feeds["q"].sql.endswith("WHERE status = 'shipped'\n")


def test_env_var_default(tmp_path, monkeypatch):
    monkeypatch.delenv("FEEDCTL_TEST_STATUS", raising=False)
    root = project(
        tmp_path,
        "SELECT id FROM {{ source('shop', 'orders') }} WHERE status = '{{ env_var('FEEDCTL_TEST_STATUS', 'open') }}'\n",
    )
    assert compile_ok(root).feeds["q"].sql.endswith("WHERE status = 'open'\n")


def test_env_var_unset(tmp_path, monkeypatch):
    monkeypatch.delenv("FEEDCTL_TEST_STATUS", raising=False)
    root = project(
        tmp_path,
        "SELECT id\nFROM {{ source('shop', 'orders') }}\nWHERE status = '{{ env_var('FEEDCTL_TEST_STATUS') }}'\n",
    )
    problem = one_error(root, "FC403")
    assert (problem.file, problem.line) == ("feeds/q.sql", 3)


# ---------------------------------------------------------------------------------------------- Jinja syntax


def test_jinja_syntax_error(tmp_path):
    root = project(tmp_path, "SELECT id\nFROM {{ source('shop', 'orders') }}\nWHERE amount > {{ var('min_amount' }}\n")
    problem = one_error(root, "FC401")
    assert (problem.file, problem.line) == ("feeds/q.sql", 3)


def test_jinja_unclosed_block(tmp_path):
    root = project(tmp_path, "SELECT id\nFROM {{ source('shop', 'orders') }}\n{% if true %}\nWHERE amount > 1\n")
    problem = one_error(root, "FC401")
    assert problem.file == "feeds/q.sql"


def test_query_in_a_feed_sub_folder(tmp_path):
    root = project(
        tmp_path,
        files={
            "feeds/shop/feeds.yml": feed_yaml("sql/q.sql"),
            "feeds/shop/sql/q.sql": "SELECT id\nFROM {{ source('shop', 'orders') }\n",
        },
    )
    problem = one_error(root, "FC401")
    assert (problem.file, problem.line) == ("feeds/shop/sql/q.sql", 2)


# ---------------------------------------------------------------------------------------------- SQL rule positions


def test_rule_points_at_the_query_file_not_the_rendered_sql(tmp_path):
    query = "SELECT id,\n       status\nFROM {{ source('shop', 'orders') }} WHERE rand() < 0.5\n"
    root = project(tmp_path, query)
    problem = one_error(root, "FC516")
    assert problem.file == "feeds/q.sql"
    assert (problem.line, problem.column) == position(query, "rand()")
    compiled = "SELECT id,\n       status\nFROM shop.orders WHERE rand() < 0.5\n"
    line, column = position(compiled, "rand()")
    assert f"rendered line {line}: FROM shop.orders WHERE rand() < 0.5" in problem.hint


def test_rule_after_a_var_on_the_same_line(tmp_path):
    query = (
        "SELECT id FROM {{ source('shop', 'orders') }}\n"
        "WHERE amount > {{ var('min_amount') }} AND status IN (SELECT status FROM shop.customers)\n"
    )
    root = project(tmp_path, query)
    found = errors(root)
    assert "FC506" in [d.code for d in found]
    problem = next(d for d in found if d.code == "FC506")
    assert problem.line == 2
    line = query.splitlines()[1]
    assert line.index("(SELECT") < problem.column <= len(line)


def test_unknown_column_is_located_in_the_query_file(tmp_path):
    query = "SELECT id, amount\nFROM {{ source('shop', 'orders') }}\nWHERE amount > 1 AND colr = 'x'\n"
    root = project(tmp_path, query)
    problem = one_error(root, "FC518")
    assert (problem.file, problem.line, problem.column) == ("feeds/q.sql", *position(query, "colr"))
    assert "rendered line 3: WHERE amount > 1 AND colr = 'x'" in problem.hint


def test_unknown_column_that_prefixes_another_name_is_located(tmp_path):
    # `stat` is unknown; `status_code` earlier on the same line starts with the same letters
    query = "SELECT id FROM {{ source('shop', 'orders') }} WHERE status_code = 1 AND stat = 'x'\n"
    root = project(tmp_path, query)
    problem = one_error(root, "FC518")
    assert (problem.line, problem.column) == position(query, "stat ")


def test_second_occurrence_on_a_line_is_located(tmp_path):
    query = "SELECT id, {{ 'amount' }} AS a, rand() AS r1, rand() AS r2 FROM {{ source('shop', 'orders') }}\n"
    root = project(tmp_path, query)
    found = [d for d in errors(root) if d.code == "FC516"]
    assert [(d.line, d.column) for d in found] == [position(query, "rand()"), position(query, "rand()", 1)]


def test_rule_in_a_query_without_jinja_has_no_compiled_hint(tmp_path):
    query = "SELECT id\nFROM shop.orders\nORDER BY id\n"
    root = project(tmp_path, query)
    problem = one_error(root, "FC513")
    assert (problem.line, problem.column) == (3, 1)
    assert "rendered line" not in problem.hint


def test_rule_when_the_rendering_changes_line_count(tmp_path):
    query = "SELECT id, {{ bucket() }} AS b\nFROM {{ source('shop', 'orders') }}\nWHERE uuid() IS NOT NULL\n"
    root = project(
        tmp_path,
        query,
        {
            "macros/m.sql": "{% macro bucket() %}CASE\n  WHEN amount > 1 THEN 'x'\n  ELSE 'y'\nEND{% endmacro %}",
        },
    )
    problem = one_error(root, "FC516")
    assert problem.file == "feeds/q.sql"
    assert (problem.line, problem.column) == position(query, "uuid()")
    assert "rendered line 6: WHERE uuid() IS NOT NULL" in problem.hint


def test_rule_broken_by_a_macro_points_at_the_macro_call(tmp_path):
    query = "SELECT id,\n  {{ noisy() }} AS n\nFROM {{ source('shop', 'orders') }}\n"
    root = project(tmp_path, query, {"macros/m.sql": "{% macro noisy() %}rand(){% endmacro %}"})
    problem = one_error(root, "FC516")
    assert (problem.file, problem.line, problem.column) == ("feeds/q.sql", *position(query, "{{ noisy() }}"))
    assert "rendered line 2: rand() AS n" in problem.hint


def test_syntax_error_in_the_rendered_sql(tmp_path):
    query = "SELECT id\nFROM {{ source('shop', 'orders') }}\nWHERE (amount > 1\n"
    root = project(tmp_path, query)
    problem = one_error(root, "FC501")
    assert problem.line == 3


# ---------------------------------------------------------------------------------------------- Delta schemas


def test_columns_checked_against_the_delta_table(tmp_path):
    root = project(tmp_path, "SELECT id, AMOUNT, cdc_prev.status FROM {{ source('shop', 'orders') }}\n")
    result = compile_ok(root)
    assert result.feeds["q"].schema_checked
    assert result.table_schemas["shop.orders"].columns == list(ORDERS)
    assert result.feeds["q"].columns == {"shop.orders": ["amount", "id", "status"]}


def test_unknown_cdc_prev_column(tmp_path):
    query = "SELECT id FROM {{ source('shop', 'orders') }}\nWHERE cdc_prev.statuss IS NULL\n"
    root = project(tmp_path, query)
    problem = one_error(root, "FC518")
    assert (problem.line, problem.column) == position(query, "statuss")
    assert '"status"' in problem.hint


def test_missing_table_is_a_warning_and_compile_succeeds(tmp_path):
    root = project(tmp_path, "SELECT id, no_such_column FROM {{ source('shop', 'orders') }}\n", tables=False)
    result = compile_ok(root)
    warnings = [d for d in result.warnings if d.code == "FC521"]
    assert len(warnings) == 1
    assert warnings[0].file == "project.yml"
    assert not result.feeds["q"].schema_checked
    assert result.feeds["q"].columns == {"shop.orders": ["id", "no_such_column"]}


def test_missing_table_is_not_opened_when_checks_are_off(tmp_path):
    root = project(tmp_path, "SELECT id FROM {{ source('shop', 'orders') }}\n", tables=False)
    result = compile_project(root, check_tables=False)
    assert [d.code for d in result.diagnostics] == ["FC209"]  # nothing of the table: only the sinkless feed
    assert not result.feeds["q"].schema_checked


def test_partitioned_table_gives_partition_predicates(tmp_path):
    root = project(
        tmp_path,
        "SELECT id, amount FROM {{ source('shop', 'orders') }} AS o\n"
        "WHERE o.region = 'eu' AND id > 100 AND amount > 1\n",
        partition_by=["region"],
    )
    pd = compile_ok(root).feeds["q"].pushdown["shop.orders"]
    assert pd.predicates == ["region = 'eu'", "id > 100"]
    assert pd.partition_predicates == ["region = 'eu'"]
    assert pd.columns == ["amount", "id", "region"]


def test_unpartitioned_table_has_no_partition_predicates(tmp_path):
    root = project(tmp_path, "SELECT id FROM {{ source('shop', 'orders') }} WHERE region = 'eu' AND id > 1\n")
    pd = compile_ok(root).feeds["q"].pushdown["shop.orders"]
    assert pd.predicates == ["id > 1"] and pd.partition_predicates == []


def test_key_columns_are_read(tmp_path):
    root = project(
        tmp_path,
        files={
            "feeds/feeds.yml": feed_yaml(),
            "feeds/q.sql": "SELECT name FROM {{ source('shop', 'customers') }} WHERE region = 'eu'\n",
        },
    )
    feed = compile_ok(root).feeds["q"]
    assert feed.columns == {"shop.customers": ["id", "name", "region"]}
    assert feed.pushdown["shop.customers"].predicates == ["region = 'eu'"]


# ---------------------------------------------------------------------------------------------- definition hash

HASH_QUERY = "SELECT id, amount FROM {{ source('shop', 'orders') }} WHERE amount > 1\n"


def hashed(tmp_path: Path, name: str, query: str = HASH_QUERY, extra: str = "", sinks: str = SINKS) -> str:
    root = tmp_path / name
    write_files(
        root,
        {
            "project.yml": PROJECT,
            "sinks/sinks.yml": sinks,
            "feeds/q.sql": query,
            "feeds/feeds.yml": feed_yaml(extra=extra),
        },
    )
    write_delta(root / "data/orders", ORDERS)
    write_delta(root / "data/customers", {"region": "string", "id": "int64", "name": "string"})
    return compile_ok(root).feeds["q"].definition_hash


BASE = "    sink: files\n    description: Big orders.\n    tags: [a]\n    options:\n      updated: true\n"


def test_definition_hash_is_stable(tmp_path):
    first = hashed(tmp_path, "one", extra=BASE)
    assert first.startswith("sha256:")
    assert hashed(tmp_path, "one_again", extra=BASE) == first
    root = tmp_path / "one"
    assert compile_ok(root).feeds["q"].definition_hash == compile_ok(root).feeds["q"].definition_hash == first


def test_definition_hash_ignores_description_and_tags(tmp_path):
    first = hashed(tmp_path, "one", extra=BASE)
    changed = BASE.replace("Big orders.", "Other words.").replace("[a]", "[b, c]")
    assert hashed(tmp_path, "two", extra=changed) == first


def test_definition_hash_changes_with_the_query(tmp_path):
    first = hashed(tmp_path, "one", extra=BASE)
    assert hashed(tmp_path, "two", query=HASH_QUERY.replace("> 1", "> 2"), extra=BASE) != first


def test_definition_hash_changes_with_a_var_that_changes_the_query(tmp_path):
    query = "SELECT id FROM {{ source('shop', 'orders') }} WHERE amount > {{ var('min_amount') }}\n"
    root = tmp_path / "p"
    write_files(
        root,
        {
            "project.yml": PROJECT,
            "sinks/sinks.yml": SINKS,
            "feeds/q.sql": query,
            "feeds/feeds.yml": feed_yaml(extra=BASE),
        },
    )
    write_delta(root / "data/orders", ORDERS)
    write_delta(root / "data/customers", {"region": "string", "id": "int64", "name": "string"})
    one = compile_ok(root).feeds["q"].definition_hash
    assert compile_ok(root, vars_override={"min_amount": 10}).feeds["q"].definition_hash == one
    assert compile_ok(root, vars_override={"min_amount": 11}).feeds["q"].definition_hash != one


def test_definition_hash_changes_with_an_option_a_job_cannot_take_in_place(tmp_path):
    first = hashed(tmp_path, "one", extra=BASE)
    assert hashed(tmp_path, "two", extra=BASE + "      full_table_name: true\n") != first
    assert hashed(tmp_path, "three", extra=BASE + "      schema_change_policy: stop\n") != first
    assert hashed(tmp_path, "four", extra=BASE.replace("updated: true", "updated: false")) == first
    assert hashed(tmp_path, "five", extra=BASE + "      diff: true\n") == first


def test_definition_hash_changes_with_the_sink(tmp_path):
    first = hashed(tmp_path, "one", extra=BASE)
    assert hashed(tmp_path, "two", extra=BASE.replace("sink: files", "sink: other")) != first
    assert hashed(tmp_path, "three", extra=BASE, sinks=SINKS.replace("16MiB", "32MiB")) != first
    assert hashed(tmp_path, "four", extra=BASE, sinks=SINKS.replace("sink/files", "sink/elsewhere")) != first


def test_table_selector_finds_a_query_whose_source_call_is_in_a_macro(tmp_path):
    root = project(
        tmp_path,
        "SELECT id, status FROM {{ orders_table() }}\n",
        {"macros/tables.sql": "{% macro orders_table() %}{{ source('shop', 'orders') }}{% endmacro %}"},
    )
    assert list(compile_ok(root, selectors=["table:shop.orders"]).feeds) == ["q"]
    with pytest.raises(ProjectError) as raised:
        compile_ok(root, selectors=["table:shop.customers"])
    assert [d.code for d in raised.value.diagnostics if d.is_error] == ["FC602"]
