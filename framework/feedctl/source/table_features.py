"""The Delta table features feedctl reads, and what it says of a table that asks for one it does not.

A reader must understand every reader feature of a table's protocol (reader version 3), or its reader
version (1: none; 2: column mapping). Writer features change only how a table is written.
"""

from __future__ import annotations

# What each reader feature asks of a reader, and where feedctl does it.
READ = {
    "columnMapping": "columns found by physical name or field id (source/data_file.py)",
    "deletionVectors": "rows a deletion vector deletes left out (source/deletion_vector.py)",
    "timestampNtz": "timestamps without a time zone",
    "v2Checkpoint": "checkpoints with sidecars (source/delta_log.py)",
    "vacuumProtocolCheck": "nothing for a reader: it guards VACUUM",
    "typeWidening": "values of older files widened to the version's types (source/data_file.py)",
    "typeWidening-preview": "the same, as Databricks Runtime 14 wrote it",
}

# Why the others are refused, where it is known.
WHY = {
    "variantType": "VARIANT columns are not read",
    "variantType-preview": "VARIANT columns are not read",
    "variantShredding-preview": "VARIANT columns are not read",
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
    return (f"needs the table feature{'s' if len(refused) > 1 else ''} {', '.join(refused)}, which feedctl "
            f"does not read" + (f" ({reasons})" if reasons else ""))
