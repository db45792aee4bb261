"""Cloud-storage file names (reference §4.2), chosen so that listing a sink in lexicographic order gives
emission order, and a re-run of a batch rewrites the same names.

    <partition>/<33-digit timestamp>-<uniquer>-<topic>-<schema id>.<ndjson|csv>[.gz|.zst] | .parquet | .avro
    <partition>/<33-digit timestamp>.RESOLVED

The timestamp is the inclusive lower bound of the event timestamps in the file. `-` sorts before `.`, so a
resolved file follows the data files of its own timestamp.
"""

from __future__ import annotations

from datetime import datetime, timezone
from urllib.parse import parse_qsl, urlsplit

from feedctl.units import Hlc

EXTENSIONS = {"json": ".ndjson", "csv": ".csv", "parquet": ".parquet", "avro": ".avro"}
COMPRESSED = {"gzip": ".gz", "zstd": ".zst"}


def ts33(ts: Hlc) -> str:
    """`YYYYMMDDHHMMSS` + 9 digits of nanoseconds + 10 digits of logical."""
    seconds, nanos = divmod(ts.wall, 1_000_000_000)
    moment = datetime.fromtimestamp(seconds, tz=timezone.utc)
    return f"{moment:%Y%m%d%H%M%S}{nanos:09d}{ts.logical:010d}"


def parse_ts33(text: str) -> Hlc:
    if len(text) != 33 or not text.isdigit():
        raise ValueError(f"not a 33-digit timestamp: {text!r}")
    moment = datetime.strptime(text[:14], "%Y%m%d%H%M%S").replace(tzinfo=timezone.utc)
    return Hlc(int(moment.timestamp()) * 1_000_000_000 + int(text[14:23]), int(text[23:]))


def partition(ts: Hlc, partition_format: str) -> str:
    """The folder of a file, from its timestamp: `2026-11-22/`, `2026-11-22/14/` or nothing."""
    if partition_format == "flat":
        return ""
    moment = datetime.fromtimestamp(ts.wall // 1_000_000_000, tz=timezone.utc)
    return f"{moment:%Y-%m-%d}/" if partition_format == "daily" else f"{moment:%Y-%m-%d/%H}/"


def uniquer(job_id: int, batch_seq: int, span: int, file_seq: int) -> str:
    """Deterministic: a re-run of batch `batch_seq` names its files exactly as the first run did."""
    return f"{job_id:016x}-{batch_seq}-{span}-{file_seq:08x}"


def extension(fmt: str, compression: str | None) -> str:
    """`.ndjson`, `.csv` (and `.gz`/`.zst` when compressed), `.parquet`, `.avro` (compressed inside)."""
    return EXTENSIONS[fmt] + (COMPRESSED[compression] if compression and fmt in ("json", "csv") else "")


def data_file(
    ts: Hlc, unique: str, topic: str, schema_id: int, fmt: str, compression: str | None, partition_format: str
) -> str:
    ext = extension(fmt, compression)
    return f"{partition(ts, partition_format)}{ts33(ts)}-{unique}-{topic}-{schema_id:x}{ext}"


def resolved_file(ts: Hlc, partition_format: str) -> str:
    return f"{partition(ts, partition_format)}{ts33(ts)}.RESOLVED"


def topic_name(table_fqn: str, full_table_name: bool, sink_uri: str = "", sink_options: dict | None = None) -> str:
    """`rides`, or `movr.rides` with `full_table_name`, after the sink's `topic_prefix`; or the one topic
    of a Kafka sink's `topic_name`. Either may be a sink option or, as in CockroachDB, a URI parameter. A
    feed's later contract version's topics end with its `topic_suffix` (`sinks/versioned.py`)."""
    options = sink_options or {}
    params = dict(parse_qsl(urlsplit(sink_uri).query))
    suffix = options.get("topic_suffix", "")
    single = options.get("topic_name") or params.get("topic_name")
    if single:
        return single + suffix
    prefix = options.get("topic_prefix") or params.get("topic_prefix", "")
    return prefix + (table_fqn if full_table_name else table_fqn.split(".", 1)[1]) + suffix
