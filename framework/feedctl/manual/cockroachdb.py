"""How each feed and sink option relates to CockroachDB's option of the same name (`CREATE CHANGEFEED ...
WITH`, or a sink URI's parameter), for the manual's reference. A test holds it to the JSON Schemas: every
option has a line here and no line names an option that does not exist."""

from __future__ import annotations

SAME = "As CockroachDB's."

FEED_OPTIONS: dict[str, str] = {
    "resolved": SAME,
    "min_checkpoint_frequency": SAME,
    "updated": "As CockroachDB's: an initial scan's or backfill's rows carry the time of the scan.",
    "diff": SAME,
    "mvcc_timestamp": "As CockroachDB's: the timestamp of the Delta commit that wrote the change.",
    "envelope": "CockroachDB's values and rules; `enriched` compiles, but a job refuses to run it (not yet built).",
    "enriched_properties": SAME,
    "format": "CockroachDB's `json`, `csv`, `parquet` and `avro`; `avro` writes container files with the schema "
    "inside, to cloud storage, with no schema registry. No `protobuf`.",
    "initial_scan": 'As CockroachDB\'s. YAML 1.2: write `"yes"` or `yes` as a string, never a boolean.',
    "cursor": "CockroachDB's event timestamp, and also an RFC 3339 time or a Delta version (`version:12`).",
    "end_time": "CockroachDB's nanoseconds or event timestamp, and also an RFC 3339 time.",
    "schema_change_policy": SAME,
    "schema_change_events": SAME,
    "execution_locality": "As CockroachDB's, matched against each node's `--locality`.",
    "range_distribution_strategy": "As CockroachDB's, over a job's spans (a table's files by key) and nodes.",
    "key_in_value": SAME,
    "topic_in_value": SAME,
    "full_table_name": "As CockroachDB's; the full name is `<source>.<table>`.",
    "on_error": SAME,
    "batch_rows": "feedctl's own: CockroachDB has no batch of a Delta table to bound.",
    "batch_bytes": "feedctl's own: CockroachDB has no batch of a Delta table to bound.",
    "metrics_label": "As CockroachDB's: the `scope` label of the feed's metrics.",
}

SINK_OPTIONS: dict[str, str] = {
    "file_size": "CockroachDB's URI parameter of cloud storage sinks.",
    "partition_format": "CockroachDB's URI parameter of cloud storage sinks.",
    "compression": "CockroachDB's `compression` option (`gzip`, `zstd`).",
    "topic_prefix": "CockroachDB's URI parameter.",
    "topic_name": "CockroachDB's URI parameter of Kafka sinks.",
    "storage_options": "feedctl's own: the object store's settings, which CockroachDB takes as URI parameters.",
    "kafka_sink_config": SAME,
    "webhook_sink_config": SAME,
    "webhook_auth_header": SAME,
    "webhook_client_timeout": SAME,
    "extra_headers": SAME,
}
