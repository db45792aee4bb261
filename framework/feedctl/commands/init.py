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
        # changes: auto      # where its changes come from: auto (default), cdf or log (see the manual)
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
    "tests/orders.yml": """\
# Unit tests: given changes of the tables, the messages a feed emits (`feedctl test`).
unit_tests:
  - name: every_change_of_an_order
    feed: orders
    given:
      - table: shop.orders
        commits:
          - - {op: insert, row: {id: 1, customer: ada, status: open, amount: 12.50}}
            - {op: insert, row: {id: 2, customer: grace, status: open, amount: 7.25}}
          - - {op: update, row: {id: 2, customer: grace, status: shipped, amount: 7.25}}
            - {op: delete, row: {id: 1}}
    expect:  # commit by commit, and within a commit by key
      - {key: [1], after: {id: 1, customer: ada, status: open, amount: 12.50}}
      - {key: [2], after: {id: 2, customer: grace, status: open, amount: 7.25}}
      - {key: [1], after: null}
      - key: [2]
        after: {id: 2, customer: grace, status: shipped, amount: 7.25}
        before: {id: 2, customer: grace, status: open, amount: 7.25}

  - name: large_orders_only_with_their_previous_status
    feed: large_orders
    given:
      - table: shop.orders
        commits:
          - - {op: insert, row: {id: 1, customer: ada, status: open, amount: 12.50}}
            - {op: insert, row: {id: 2, customer: grace, status: open, amount: 7.25}}
          - - {op: update, row: {id: 1, customer: ada, status: shipped, amount: 12.50}}
    expect:
      - {key: [1], after: {id: 1, customer: ada, status: open, amount: 12.50, previous_status: null, op: insert}}
      - {key: [1], after: {id: 1, customer: ada, status: shipped, amount: 12.50, previous_status: open, op: update}}
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

    rows = pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int64()),
            "customer": ["ada", "grace", "edsger"],
            "status": ["open", "open", "shipped"],
            "amount": pa.array([Decimal("12.50"), Decimal("7.25"), Decimal("99.00")], pa.decimal128(10, 2)),
        }
    )
    write_deltalake(str(path), rows, configuration={"delta.enableChangeDataFeed": "true"})


def create_project(directory: str | Path) -> Path:
    """A new project at `directory`, written whole or not at all."""
    root = Path(directory).resolve()
    if re.search(r"[\x00-\x1f\x7f]", str(root)):
        raise UsageError(
            f"{str(root)!r} holds a control character (a line break, a tab...); choose another directory name"
        )
    if (root / "project.yml").exists():
        raise UsageError(f"{root} already holds a project.yml; choose another directory")
    # Never overwrite a user's files, and check before writing anything so a refused init leaves no trace.
    table = root / SAMPLE_TABLE
    conflicts = [r for r in _FILES if r != ".gitignore" and (root / r).exists()]
    conflicts += [table.relative_to(root).as_posix()] if table.exists() else []
    if conflicts:
        raise UsageError(f"{root} already holds {', '.join(conflicts)}; choose another directory")
    made = _Made(root)
    try:
        made.folder(table)
        _write_sample_table(table)
        for relative, text in _FILES.items():
            path = root / relative
            if relative == ".gitignore" and path.exists():
                continue  # keep the user's own
            made.folder(path.parent)
            path.write_text(text.replace("{name}", _project_name(root)), encoding="utf-8")
            made.files.append(path)
        from feedctl.compiler.manifest import write_schemas

        made.folder(root / "target")
        write_schemas(root / "target")
    except Exception as exc:
        made.undo()
        raise UsageError(f"cannot create a project at {root}: {type(exc).__name__}: {exc}") from None
    return root


class _Made:
    """What init created, so that a failure halfway removes it all, and nothing of the user's."""

    def __init__(self, root: Path):
        self.root, self.files, self.folders = root, [], []

    def folder(self, path: Path) -> None:
        """`path` and the folders above it that do not exist yet, made and remembered."""
        missing = [p for p in (path, *path.parents) if not p.exists()]
        path.mkdir(parents=True, exist_ok=True)
        self.folders.extend(reversed(missing))

    def undo(self) -> None:
        import shutil

        for path in self.files:
            path.unlink(missing_ok=True)
        for folder in reversed(self.folders):  # the deepest first; a made folder holds only what init made
            shutil.rmtree(folder, ignore_errors=True)
