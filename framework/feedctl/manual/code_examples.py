"""An example for each diagnostic code (`diagnostics.CODES`), for the manual's reference page of diagnostics:
the file or files that carry the mistake, laid over `BASE` (a small project that compiles clean), and the
command that reports it. tests/unit/test_manual_code_examples.py runs every example and checks that it reports
its code, so that the page cannot show an example that no longer triggers it.

A Delta table here is text: its folder's `_delta_log/00000000000000000000.json`, holding a `protocol` and a
`metaData` action (its columns, its configuration) and no data file, which is all compile reads of it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from textwrap import dedent


@dataclass(frozen=True)
class CodeExample:
    """`files`: project-relative path -> text, written over `BASE`; `removes`: files of `BASE` deleted;
    `command`: the feedctl arguments after `--project-dir DIR`; `env`: environment variables the example needs
    set (a value) or unset (None); `note`: when the code appears, for a code that no project and command line
    trigger (its `files` then empty, and nothing is run)."""

    files: dict[str, str] = field(default_factory=dict)
    command: tuple[str, ...] = ("compile",)
    env: dict[str, str | None] = field(default_factory=dict)
    removes: tuple[str, ...] = ()
    note: str = ""


PROJECT = "project.yml"
SINKS = "sinks/files.yml"
FEEDS = "feeds/orders.yml"
QUERY = "feeds/orders.sql"
TABLE_LOG = "data/shop/orders/_delta_log/00000000000000000000.json"
SCHEMAS = "schemas.yml"
UNIT_TESTS = "tests/orders.yml"

COLUMNS = {"id": "long", "customer": "string", "region": "string", "status": "string", "amount": "decimal(10,2)"}


def delta_log(columns: dict[str, str] = COLUMNS, change_data_feed: bool = True, protocol: dict | None = None) -> str:
    """The first commit of a Delta table of `columns` (name -> Delta type), as its log holds it."""
    schema = {
        "type": "struct",
        "fields": [{"name": name, "type": kind, "nullable": True, "metadata": {}} for name, kind in columns.items()],
    }
    metadata = {
        "id": "6f1c2a4e-0d3b-4c5e-9a8f-2b7d1e0c3a59",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps(schema, separators=(",", ":")),
        "partitionColumns": [],
        "configuration": {"delta.enableChangeDataFeed": "true" if change_data_feed else "false"},
        "createdTime": 1735689600000,
    }
    actions = [{"protocol": protocol or {"minReaderVersion": 1, "minWriterVersion": 4}}, {"metaData": metadata}]
    return "".join(json.dumps(action, separators=(",", ":")) + "\n" for action in actions)


def _text(text: str) -> str:
    """A file's text written indented in this module: its common indentation and first newline dropped."""
    return dedent(text).lstrip("\n")


_STATE = "state: sqlite:///target/state.db\n"


def _project(spark: str = "", table: str = "", state: str = _STATE) -> str:
    """BASE's project.yml, with `spark` (top-level keys after its state, dedented) and `table` (YAML lines
    added to its table, indented as they are)."""
    head = "name: shop\nconfig-version: 1\n" + state + _text(spark)
    sources = _text(
        """
        sources:
          - name: shop
            tables:
              - name: orders
                path: data/shop/orders
                primary_key: [id]
        """
    )
    return head + sources + table


def _feed(extra: str = "", name: str = "orders", query: str = "orders.sql", sink: str = "files") -> str:
    """BASE's feeds/orders.yml: its feed, with `extra` (YAML lines after its keys, indented as they are); an
    empty `query` or `sink` is left out."""
    lines = [f"  - name: {name}"] + [f"    {k}: {v}" for k, v in (("query", query), ("sink", sink)) if v]
    return "feeds:\n" + "\n".join(lines) + "\n" + extra


def _options(options: str) -> dict[str, str]:
    """feeds/orders.yml with `options` (YAML lines) as its feed's options."""
    return {FEEDS: _feed("    options:\n" + "".join(f"      {line}\n" for line in _text(options).splitlines()))}


def _query(sql: str) -> dict[str, str]:
    """feeds/orders.sql as `sql`."""
    return {QUERY: _text(sql)}


BASE: dict[str, str] = {
    PROJECT: _project(),
    SINKS: _text(
        """
        sinks:
          - name: files
            uri: file://target/sink/orders
        """
    ),
    FEEDS: _feed(),
    QUERY: _text(
        """
        SELECT id, status, amount
        FROM {{ source('shop', 'orders') }}
        """
    ),
    TABLE_LOG: delta_log(),
}

_UNIT_TEST = """
    unit_tests:
      - name: open_orders
        feed: {feed}
        given:
          - table: shop.orders
            commits:
              - [{{op: insert, row: {{id: 1, status: open, amount: 5}}}}]
    """

EXAMPLES: dict[str, CodeExample] = {
    # files and YAML
    "FC001": CodeExample(files={"project.yaml": BASE[PROJECT]}, removes=(PROJECT,)),
    "FC002": CodeExample(files={"target": "notes of the last deploy\n"}),
    "FC003": CodeExample(files={FEEDS: _feed("    tags: [shop, orders\n")}),
    "FC004": CodeExample(files=_options("updated: true\ndiff: true\nupdated: false")),
    "FC005": CodeExample(files={"sinks/more.yml": "# sinks for the reporting team\n# (to do)\n"}),
    # JSON Schema
    "FC101": CodeExample(files=_options("envelop: wrapped")),
    "FC102": CodeExample(
        files={
            SINKS: _text(
                """
                sinks:
                  - name: files
                    description: Order changes as files
                """
            )
        }
    ),
    "FC103": CodeExample(files=_options("updated: yes")),
    "FC104": CodeExample(files=_options("envelope: wraped")),
    "FC105": CodeExample(files={FEEDS: _feed(name="Orders-Feed")}),
    "FC106": CodeExample(files=_options("batch_rows: 0")),
    "FC107": CodeExample(files=_options("resolved: 10 seconds")),
    "FC108": CodeExample(files={SINKS: BASE[SINKS] + "    options:\n      file_size: 16 megabytes\n"}),
    "FC109": CodeExample(files=_options("cursor: yesterday")),
    "FC110": CodeExample(files={FEEDS: _feed("    description: \"Orders of {{ env_var('SHOP_TEAM', 'sales') }}\"\n")}),
    # references between files
    "FC201": CodeExample(files={"feeds/orders_copy.yml": BASE[FEEDS]}),
    "FC202": CodeExample(files={FEEDS: _feed(sink="file")}),
    "FC203": CodeExample(files={FEEDS: _feed("    tables: [shop.order]\n", query="")}),
    "FC204": CodeExample(files={FEEDS: _feed(query="order.sql")}),
    "FC205": CodeExample(files={FEEDS: _feed("    tables: [shop.orders]\n")}),
    "FC206": CodeExample(files={FEEDS: _feed(query="")}),
    "FC207": CodeExample(
        files={
            SINKS: _text(
                """
                sinks:
                  - name: files
                    uri: kafak://broker:9092
                """
            )
        }
    ),
    "FC208": CodeExample(files={PROJECT: _project(table="        region_column: region\n")}),
    "FC209": CodeExample(files={FEEDS: _feed(sink="")}),
    "FC210": CodeExample(files={PROJECT: _project(state="state: mysql://db.example.com/feedctl\n")}),
    # option combinations
    "FC301": CodeExample(files=_options("format: csv")),
    "FC302": CodeExample(files={SINKS: BASE[SINKS] + "    options:\n      webhook_auth_header: Bearer x\n"}),
    "FC303": CodeExample(files=_options("resolved: 5s")),
    "FC304": CodeExample(files=_options("cursor: '2025-06-01T00:00:00Z'\nend_time: '2025-01-01T00:00:00Z'")),
    "FC305": CodeExample(
        files={
            FEEDS: BASE[FEEDS] + _feed(name="open_orders").removeprefix("feeds:\n"),
        }
    ),
    "FC306": CodeExample(
        files={
            PROJECT: _project(
                spark="""
                spark:
                  master: spark://spark-master.internal:7077
                """
            )
        }
    ),
    "FC307": CodeExample(files=_options("cursor: '2130-06-01T00:00:00Z'")),
    "FC308": CodeExample(
        files={
            PROJECT: _project(
                spark="""
                spark:
                  remote: sc://spark-connect.internal:15002
                  conf:
                    spark.executor.memory: 4g
                staging: s3://shop-stage/feedctl
                """
            )
        }
    ),
    # Jinja
    "FC401": CodeExample(
        files=_query(
            """
            SELECT id, status, amount
            FROM {{ source('shop', 'orders') }
            """
        )
    ),
    "FC402": CodeExample(
        files=_query(
            """
            SELECT id, {{ cents('amount') }} AS amount_cents
            FROM {{ source('shop', 'orders') }}
            """
        )
    ),
    "FC403": CodeExample(
        files=_query(
            """
            SELECT id, status, amount
            FROM {{ source('shop', 'orders') }}
            WHERE region = '{{ env_var('SHOP_REGION') }}'
            """
        ),
        env={"SHOP_REGION": None},
    ),
    "FC404": CodeExample(
        files=_query(
            """
            SELECT id, status, amount
            FROM {{ source('shop', 'orders') }}
            WHERE amount >= {{ var('min_amount') }}
            """
        )
    ),
    "FC405": CodeExample(
        files=_query(
            """
            SELECT id, status, amount
            FROM {{ source('shop', 'order') }}
            """
        )
    ),
    "FC406": CodeExample(
        files={
            "macros/money.sql": _text(
                """
                {% macro cents(column) -%}
                CAST({{ column * 100 AS BIGINT)
                {%- endmacro %}
                """
            )
        }
    ),
    "FC407": CodeExample(
        files=_query(
            """
            SELECT id, status, amount
            FROM {{ source('shop', 'orders') }}
            -- {{ 'x' * 10**9 }}
            """
        )
    ),
    # CDC query rules
    "FC501": CodeExample(
        files=_query(
            """
            SELECT id, status, amount
            FROM {{ source('shop', 'orders') }}
            WHERE status = 'open' AND AND amount > 0
            """
        )
    ),
    "FC502": CodeExample(
        files=_query(
            """
            DELETE FROM {{ source('shop', 'orders') }}
            WHERE status = 'cancelled'
            """
        )
    ),
    "FC503": CodeExample(
        files=_query(
            """
            SELECT id, status FROM {{ source('shop', 'orders') }};
            SELECT id, amount FROM {{ source('shop', 'orders') }}
            """
        )
    ),
    "FC504": CodeExample(
        files=_query(
            """
            SELECT 1 AS id, 'open' AS status
            """
        )
    ),
    "FC505": CodeExample(
        files=_query(
            """
            SELECT o.id, o.status, p.amount AS other_amount
            FROM {{ source('shop', 'orders') }} AS o
            JOIN {{ source('shop', 'orders') }} AS p ON o.customer = p.customer
            """
        )
    ),
    "FC506": CodeExample(
        files=_query(
            """
            SELECT id, status, amount
            FROM {{ source('shop', 'orders') }}
            WHERE customer IN (SELECT customer FROM {{ source('shop', 'orders') }} WHERE status = 'vip')
            """
        )
    ),
    "FC507": CodeExample(
        files=_query(
            """
            WITH open_orders AS (SELECT id, amount FROM {{ source('shop', 'orders') }} WHERE status = 'open')
            SELECT id, amount FROM open_orders
            """
        )
    ),
    "FC508": CodeExample(
        files=_query(
            """
            SELECT id, amount FROM {{ source('shop', 'orders') }} WHERE status = 'open'
            UNION ALL
            SELECT id, amount FROM {{ source('shop', 'orders') }} WHERE status = 'shipped'
            """
        )
    ),
    "FC509": CodeExample(
        files=_query(
            """
            SELECT status, count(*) AS n
            FROM {{ source('shop', 'orders') }}
            """
        )
    ),
    "FC510": CodeExample(
        files=_query(
            """
            SELECT id, row_number() OVER (PARTITION BY customer ORDER BY amount) AS rank
            FROM {{ source('shop', 'orders') }}
            """
        )
    ),
    "FC511": CodeExample(
        files=_query(
            """
            SELECT status
            FROM {{ source('shop', 'orders') }}
            GROUP BY status
            """
        )
    ),
    "FC512": CodeExample(
        files=_query(
            """
            SELECT id, amount
            FROM {{ source('shop', 'orders') }}
            HAVING amount > 100
            """
        )
    ),
    "FC513": CodeExample(
        files=_query(
            """
            SELECT id, status, amount
            FROM {{ source('shop', 'orders') }}
            ORDER BY amount DESC
            """
        )
    ),
    "FC514": CodeExample(
        files=_query(
            """
            SELECT id, status, amount
            FROM {{ source('shop', 'orders') }}
            LIMIT 100
            """
        )
    ),
    "FC515": CodeExample(
        files=_query(
            """
            SELECT DISTINCT customer
            FROM {{ source('shop', 'orders') }}
            """
        )
    ),
    "FC516": CodeExample(
        files=_query(
            """
            SELECT id, status, amount
            FROM {{ source('shop', 'orders') }}
            WHERE rand() < 0.1
            """
        )
    ),
    "FC517": CodeExample(
        files=_query(
            """
            SELECT id, explode(split(customer, ' ')) AS name_part
            FROM {{ source('shop', 'orders') }}
            """
        )
    ),
    "FC518": CodeExample(
        files=_query(
            """
            SELECT id, status, amout
            FROM {{ source('shop', 'orders') }}
            """
        )
    ),
    "FC519": CodeExample(
        files=_query(
            """
            SELECT id, status, amount
            FROM shop.order_archive
            """
        )
    ),
    "FC520": CodeExample(
        files=_query(
            """
            SELECT id, status, event_op(id) AS op
            FROM {{ source('shop', 'orders') }}
            """
        )
    ),
    "FC521": CodeExample(files={PROJECT: _project().replace("path: data/shop/orders", "path: data/shop/order")}),
    "FC522": CodeExample(
        files={
            SCHEMAS: _text(
                """
                tables:
                  - name: shop.orders
                    version: 0
                    columns: [id, status, amount]
                """
            )
        }
    ),
    "FC523": CodeExample(
        files={
            SCHEMAS: _text(
                """
                tables:
                  - name: shop.orders
                    version: 0
                    partition_columns: []
                    columns:
                      - {name: id, type: long}
                      - {name: customer, type: string}
                      - {name: region, type: string}
                      - {name: status, type: string}
                      - {name: amount, type: double}
                """
            )
        }
    ),
    "FC524": CodeExample(
        files={
            TABLE_LOG: delta_log(
                protocol={
                    "minReaderVersion": 3,
                    "minWriterVersion": 7,
                    "readerFeatures": ["geospatial"],
                    "writerFeatures": ["geospatial"],
                }
            )
        }
    ),
    "FC525": CodeExample(
        files={PROJECT: _project(table="        changes: cdf\n"), TABLE_LOG: delta_log(change_data_feed=False)}
    ),
    # command line
    "FC601": CodeExample(command=("compile", "-s", "order")),
    "FC602": CodeExample(command=("ls", "-s", "tag:nightly")),
    # unit tests (`feedctl test`)
    "FC701": CodeExample(files={UNIT_TESTS: _text(_UNIT_TEST.format(feed="orders"))}, command=("test",)),
    "FC702": CodeExample(
        files={
            UNIT_TESTS: _text(_UNIT_TEST.format(feed="order"))
            + "    expect:\n      - {key: [1], after: {id: 1, status: open, amount: 5}}\n"
        },
        command=("test",),
    ),
}
