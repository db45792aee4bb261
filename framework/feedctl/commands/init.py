"""`feedctl init DIR`: a small project that compiles as it is, with a sample Delta table to feed from, kept in
the project (outside `target/`, which Git ignores) so that a clone of it has the table too."""

from __future__ import annotations

import re
from pathlib import Path

from feedctl.diagnostics import UsageError

SAMPLE_TABLE = "data/shop/orders"  # shop.orders, a Delta table with its change data feed on

_FILES = {
    "project.yml": """\
# yaml-language-server: $schema=target/schemas/project.schema.json
name: {name}
config-version: 1
state: sqlite:///target/state.db
spark:
  master: local[*]
  conf:
    spark.sql.shuffle.partitions: "4"
sources:
  - name: shop
    tables:
      - name: orders
        path: data/shop/orders   # a sample table written by `feedctl init`; commit it with the project
        primary_key: [id]
vars:
  min_amount: 10
""",
    "feeds/orders.yml": """\
# yaml-language-server: $schema=../target/schemas/feeds.schema.json
feeds:
  - name: orders
    description: Every change of shop.orders.
    tables: [shop.orders]
    sink: local_files
    options:
      resolved: 10s
      min_checkpoint_frequency: 10s
      updated: true
      diff: true

  - name: large_orders
    description: Orders worth at least min_amount, with their status before the change.
    query: large_orders.sql
    sink: large_orders_files
    options:
      envelope: wrapped
      updated: true
""",
    "feeds/large_orders.sql": """\
SELECT id, customer, status, amount, cdc_prev.status AS previous_status, event_op() AS op
FROM {{ source('shop', 'orders') }}
WHERE amount >= {{ var('min_amount') }} AND {{ not_deleted() }}
""",
    "macros/filters.sql": """\
{% macro not_deleted() -%}
event_op() != 'delete'
{%- endmacro %}
""",
    "sinks/local.yml": """\
# yaml-language-server: $schema=../target/schemas/sinks.schema.json
sinks:
  - name: local_files
    uri: file://target/sink/local_files
    options:
      file_size: 16MiB
      partition_format: daily
  - name: large_orders_files
    uri: file://target/sink/large_orders
""",
    ".gitignore": "target/\n",
}


def _project_name(directory: Path) -> str:
    name = re.sub(r"[^a-z0-9_]+", "_", directory.name.lower()).strip("_") or "feeds"
    return "_" + name if name[0].isdigit() else name


def _write_sample_table(path: Path) -> None:
    from decimal import Decimal

    import pyarrow as pa
    from deltalake import write_deltalake

    rows = pa.table({
        "id": pa.array([1, 2, 3], pa.int64()),
        "customer": ["ada", "grace", "edsger"],
        "status": ["open", "open", "shipped"],
        "amount": pa.array([Decimal("12.50"), Decimal("7.25"), Decimal("99.00")], pa.decimal128(10, 2)),
    })
    write_deltalake(str(path), rows, configuration={"delta.enableChangeDataFeed": "true"})


def create_project(directory: str | Path) -> Path:
    root = Path(directory).resolve()
    if (root / "project.yml").exists():
        raise UsageError(f"{root} already holds a project.yml; choose another directory")
    # Never overwrite a user's files, and check before writing anything so a refused init leaves no trace.
    table = root / SAMPLE_TABLE
    conflicts = [r for r in _FILES if r != ".gitignore" and (root / r).exists()]
    conflicts += [table.relative_to(root).as_posix()] if table.exists() else []
    if conflicts:
        raise UsageError(f"{root} already holds {', '.join(conflicts)}; choose another directory")
    for relative, text in _FILES.items():
        path = root / relative
        if relative == ".gitignore" and path.exists():
            continue  # keep the user's own
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.replace("{name}", _project_name(root)), encoding="utf-8")
    _write_sample_table(table)
    from feedctl.compiler.manifest import write_schemas

    write_schemas(root / "target")
    return root
