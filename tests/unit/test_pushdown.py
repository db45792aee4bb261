"""What a reader can skip: columns a CDC query needs and its predicates on key and partition columns."""

from __future__ import annotations

from feedctl.compiler.cdc_query import analyze
from feedctl.compiler.pushdown import Pushdown, derive

COLUMNS = ["city", "id", "status", "revenue", "end_time", "ext", "crdb_region", "Rider"]
KEY = ["city", "id"]


def push(sql: str, key=KEY, partitions=(), all_columns=COLUMNS, extra=()) -> Pushdown:
    analysis = analyze(sql)
    assert analysis.problems == [], analysis.problems
    return derive(
        analysis, list(all_columns) if all_columns is not None else None, list(key), list(partitions), list(extra)
    )


# ---------------------------------------------------------------------------------------------- columns


def test_no_query_reads_everything():
    result = derive(None, COLUMNS, KEY, ["city"])
    assert result.columns is None and result.predicates == [] and result.partition_predicates == []


def test_columns_needed_include_the_key():
    assert push("SELECT status FROM movr.rides").columns == ["city", "id", "status"]


def test_columns_needed_include_the_region_column():
    assert push("SELECT status FROM movr.vehicles", key=["crdb_region", "id"], extra=["crdb_region"]).columns == [
        "crdb_region",
        "id",
        "status",
    ]
    assert push("SELECT status FROM t", extra=["crdb_region"]).columns == ["city", "crdb_region", "id", "status"]


def test_columns_from_every_clause():
    result = push("SELECT upper(status) AS s FROM t WHERE revenue > 1 AND end_time IS NOT NULL")
    assert result.columns == ["city", "end_time", "id", "revenue", "status"]


def test_cdc_prev_columns_are_needed():
    result = push("SELECT id FROM t WHERE cdc_prev.status <> status OR cdc_prev.end_time IS NULL")
    assert result.columns == ["city", "end_time", "id", "status"]


def test_star_reads_every_column():
    assert push("SELECT * FROM t").columns is None
    assert push("SELECT r.* FROM t AS r").columns is None
    assert push("SELECT to_json(struct(*)) AS payload FROM t").columns is None


def test_cdc_prev_star_reads_every_column():
    assert push("SELECT id, cdc_prev.* FROM t").columns is None


def test_struct_field_reads_its_column():
    assert push("SELECT ext.color FROM t").columns == ["city", "ext", "id"]


def test_columns_take_the_table_spelling():
    assert push("SELECT RIDER, STATUS FROM t").columns == ["Rider", "city", "id", "status"]


def test_columns_without_a_schema_are_as_written():
    assert push("SELECT status FROM t", all_columns=None).columns == ["city", "id", "status"]


def test_cdc_functions_need_no_column():
    assert push("SELECT event_op() AS op, event_schema_timestamp() AS ts FROM t").columns == ["city", "id"]


def test_alias_named_like_its_column_still_reads_it():
    assert push("SELECT lower(status) AS status FROM t").columns == ["city", "id", "status"]


def test_lateral_alias_reference():
    # `b` is an alias defined earlier in the select list: read it from the table only when the table has it
    assert push("SELECT upper(status) AS b, b AS again FROM t").columns == ["city", "id", "status"]
    assert push("SELECT upper(status) AS rider, rider AS again FROM t").columns == ["Rider", "city", "id", "status"]
    assert push("SELECT upper(status) AS b, b AS again FROM t", all_columns=None).columns is None


def test_lambda_variables_are_not_columns():
    assert push("SELECT transform(ext, x -> x + revenue) AS s FROM t").columns == ["city", "ext", "id", "revenue"]


# ---------------------------------------------------------------------------------------------- predicates


def test_key_predicates_are_pushed_down():
    result = push("SELECT status FROM t WHERE city = 'nyc' AND id > 10")
    assert result.predicates == ["city = 'nyc'", "id > 10"]
    assert result.partition_predicates == []


def test_partition_predicates_are_the_partition_only_subset():
    result = push("SELECT status FROM t WHERE city IN ('nyc', 'sf') AND id > 10", partitions=["city"])
    assert result.predicates == ["city IN ('nyc', 'sf')", "id > 10"]
    assert result.partition_predicates == ["city IN ('nyc', 'sf')"]


def test_partition_column_that_is_not_a_key():
    result = push("SELECT id FROM t WHERE crdb_region = 'us-east1' AND status = 'x'", partitions=["crdb_region"])
    assert result.predicates == ["crdb_region = 'us-east1'"]
    assert result.partition_predicates == ["crdb_region = 'us-east1'"]


def test_non_key_predicates_are_not_pushed_down():
    result = push("SELECT id FROM t WHERE status = 'open' AND revenue > 1", partitions=["city"])
    assert result.predicates == [] and result.partition_predicates == []


def test_condition_mixing_key_and_non_key_is_not_pushed_down():
    assert push("SELECT id FROM t WHERE city = status").predicates == []
    assert push("SELECT id FROM t WHERE concat(city, status) = 'x'").predicates == []


def test_or_across_key_and_non_key_is_not_pushed_down():
    result = push("SELECT id FROM t WHERE city = 'nyc' OR status = 'open'", partitions=["city"])
    assert result.predicates == [] and result.partition_predicates == []


def test_or_within_key_columns_is_pushed_down():
    result = push("SELECT id FROM t WHERE (city = 'nyc' OR id = 1) AND status = 'x'", partitions=["city"])
    assert result.predicates == ["city = 'nyc' OR id = 1"]
    assert result.partition_predicates == []


def test_cdc_prev_is_not_pushed_down():
    result = push("SELECT id FROM t WHERE cdc_prev.city = 'nyc' AND cdc_prev IS NULL", partitions=["city"])
    assert result.predicates == [] and result.partition_predicates == []


def test_event_op_is_not_pushed_down():
    result = push("SELECT id FROM t WHERE event_op() <> 'delete' AND city = 'nyc'", partitions=["city"])
    assert result.predicates == ["city = 'nyc'"]
    result = push("SELECT id FROM t WHERE event_op() = 'delete' OR city = 'nyc'", partitions=["city"])
    assert result.predicates == []


def test_event_schema_timestamp_is_not_pushed_down():
    assert push("SELECT id FROM t WHERE id > event_schema_timestamp()").predicates == []


def test_conditions_without_columns_are_not_pushed_down():
    assert push("SELECT id FROM t WHERE 1 = 1 AND TRUE").predicates == []


def test_nested_and_and_parentheses_are_split():
    result = push("SELECT id FROM t WHERE ((city = 'a' AND id = 1) AND (status = 'x' AND id < 5))")
    assert result.predicates == ["city = 'a'", "id = 1", "id < 5"]


def test_functions_of_key_columns_are_pushed_down():
    result = push("SELECT id FROM t WHERE upper(city) = 'NYC' AND id IS NOT NULL", partitions=["city"])
    assert result.predicates == ["UPPER(city) = 'NYC'", "NOT id IS NULL"]
    assert result.partition_predicates == ["UPPER(city) = 'NYC'"]


def test_qualifiers_are_stripped():
    result = push(
        "SELECT r.id FROM movr.rides AS r WHERE r.city = 'nyc' AND R.id > 3 AND movr.rides.id < 9", partitions=["city"]
    )
    assert result.predicates == ["city = 'nyc'", "id > 3", "id < 9"]
    assert result.partition_predicates == ["city = 'nyc'"]


def test_struct_field_named_like_a_partition_column_is_not_pushed_down():
    # `ext.city` is a field of the struct column `ext`, not the partition column `city`
    result = push("SELECT id FROM t WHERE ext.city = 'nyc'", partitions=["city"])
    assert result.predicates == [] and result.partition_predicates == []


def test_struct_field_of_a_key_column_keeps_its_path():
    result = push("SELECT id FROM t AS r WHERE r.ext.part = 1", key=["ext"])
    assert result.predicates == ["ext.part = 1"]


def test_key_matching_is_case_insensitive():
    result = push("SELECT id FROM t WHERE CITY = 'nyc' AND Id = 1", partitions=["City"])
    assert result.predicates == ["CITY = 'nyc'", "Id = 1"]
    assert result.partition_predicates == ["CITY = 'nyc'"]


def test_no_where_no_predicates():
    result = push("SELECT id FROM t")
    assert result.predicates == [] and result.partition_predicates == []


def test_to_json():
    result = push("SELECT id FROM t WHERE city = 'nyc'", partitions=["city"])
    assert result.to_json() == {
        "columns": ["city", "id"],
        "predicates": ["city = 'nyc'"],
        "partition_predicates": ["city = 'nyc'"],
        "scan_filter": "`city` = 'nyc'",
        "change_filter": "`city` = 'nyc'",
    }


# ---------------------------------------------------------------------------------------------- reader filters


def test_reader_filters_quote_columns_as_the_table_spells_them():
    result = push("SELECT id FROM t WHERE rider = 'x' AND id BETWEEN -1 AND 3", key=["Rider", "id"])
    assert result.scan_filter == "(`Rider` = 'x') AND (`id` BETWEEN -1 AND 3)"
    assert result.change_filter == result.scan_filter


def test_reader_filters_take_plain_comparisons_only():
    # The reader (DataFusion) knows other functions than Spark: what it may not evaluate stays with the query.
    result = push(
        "SELECT id FROM t WHERE upper(city) = 'NYC' AND city LIKE 'n%' AND id IN (1, 2) AND (id < 5 OR id IS NULL)",
        partitions=["city"],
    )
    assert len(result.predicates) == 4
    assert result.scan_filter == "(`id` IN (1, 2)) AND (`id` < 5 OR `id` IS NULL)"


def test_struct_fields_are_not_given_to_the_reader():
    result = push("SELECT id FROM t AS r WHERE r.ext.part = 1", key=["ext"])
    assert result.predicates == ["ext.part = 1"] and result.scan_filter is None


def test_change_filter_on_a_partition_column_that_is_not_a_key():
    sql = "SELECT id, status FROM t WHERE crdb_region = 'us-east1'"
    assert push(sql, partitions=["crdb_region"]).change_filter == "`crdb_region` = 'us-east1'"
    # a delete's crdb_region is NULL to the query: IS NULL would keep deletes the reader dropped
    result = push("SELECT id FROM t WHERE crdb_region IS NULL", partitions=["crdb_region"])
    assert result.scan_filter == "`crdb_region` IS NULL" and result.change_filter is None
    result = push("SELECT id FROM t WHERE crdb_region = 'a' OR crdb_region IS NULL", partitions=["crdb_region"])
    assert result.change_filter is None
    result = push("SELECT id FROM t WHERE crdb_region IS NOT NULL", partitions=["crdb_region"])
    assert result.change_filter == "NOT `crdb_region` IS NULL"


def test_change_filter_leaves_partitions_alone_when_the_row_before_shows():
    # A row moved into the partition is read without its before row: fine only if nothing shows that row.
    for sql, diff in (
        ("SELECT id FROM t WHERE crdb_region = 'a'", True),
        ("SELECT id, cdc_prev.status FROM t WHERE crdb_region = 'a'", False),
        ("SELECT id, event_op() AS op FROM t WHERE crdb_region = 'a'", False),
    ):
        analysis = analyze(sql)
        result = derive(analysis, COLUMNS, KEY, ["crdb_region"], diff=diff)
        assert result.scan_filter == "`crdb_region` = 'a'" and result.change_filter is None, sql
    # key columns are the same before and after (a key change is a delete and an insert)
    result = derive(
        analyze("SELECT id FROM t WHERE city = 'a' AND crdb_region = 'b'"), COLUMNS, KEY, ["crdb_region"], diff=True
    )
    assert result.change_filter == "`city` = 'a'"
