"""The Delta table features feedctl reads, and what it says of a table that asks for one it does not.

A reader must understand every reader feature of a table's protocol (reader version 3), or its reader
version (1: none; 2: column mapping). Writer features change only how a table is written.
"""

from __future__ import annotations

from typing import NamedTuple

# The reader features feedctl reads (the manual's docs/guides/following-a-table.md says how).
READ = frozenset(
    {
        "columnMapping",
        "deletionVectors",
        "timestampNtz",
        "v2Checkpoint",
        "vacuumProtocolCheck",
        "typeWidening",
        "typeWidening-preview",
        "variantType",
        "variantType-preview",
        "variantShredding",
        "variantShredding-preview",
    }
)

# Why the others are refused, where it is known.
WHY = {
    "geospatial": "GEOMETRY and GEOGRAPHY columns are not read",
    "catalogManaged": "its newest commits are held by a catalog, which feedctl does not ask",
    "catalogOwned-preview": "its newest commits are held by a catalog, which feedctl does not ask",
}


def unreadable(protocol) -> str | None:
    """Why feedctl cannot read a table of `protocol` (delta-rs's `ProtocolVersions`), or None."""
    version = protocol.min_reader_version
    if version > 3:
        return f"needs a reader of protocol version {version}; feedctl reads versions 1 to 3"
    refused = sorted(set(protocol.reader_features or ()) - set(READ)) if version == 3 else []
    if not refused:
        return None
    reasons = "; ".join(f"{f}: {WHY[f]}" for f in refused if f in WHY)
    return (
        f"needs the table feature{'s' if len(refused) > 1 else ''} {', '.join(refused)}, which feedctl "
        f"does not read" + (f" ({reasons})" if reasons else "")
    )


class Protocol(NamedTuple):
    """A `protocol` action, as `unreadable` reads it (delta-rs's `ProtocolVersions` has the same names)."""

    min_reader_version: int
    reader_features: list[str] | None


class TableRefused(Exception):
    """A table whose protocol asks for what feedctl does not read: the message says what, in its words."""


def refusal_in_log(log) -> str | None:
    """Why feedctl cannot read the table whose log `log` (`delta_log.DeltaLog`) is, read from the log alone;
    None when it can, or the log cannot say. delta-rs refuses to open such a table in its own words (a
    feature "not supported", a protocol action "invalid"), which would read as an outage."""
    try:
        version, protocol = log.newest_protocol()
        found = unreadable(Protocol(int(protocol.get("minReaderVersion", 1)), protocol.get("readerFeatures")))
    except Exception:  # the log cannot be read either: what opening it raised says why
        return None
    return None if found is None else f"at version {version} {found}"
