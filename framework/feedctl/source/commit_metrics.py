"""What a commit's `commitInfo` says of it, from the metrics its writer recorded (Spark's and delta-rs's names):
how many change rows reading it gives, for cutting batches by size, and whether it rewrote rows."""

from __future__ import annotations


def rows_read(entry: dict, from_log: bool) -> int:
    """The rows a version's changes are read as, from its commit's metrics: read `from_log`, the rows a
    rewrite carried over are read too, on both sides (`rewrites`)."""
    m = entry.get("operationMetrics") or {}

    def n(key):
        try:
            return int(m.get(key, 0) or 0)
        except (TypeError, ValueError):
            return 0

    updated = n("num_updated_rows") + n("num_target_rows_updated") + n("numUpdatedRows")
    copied = n("num_copied_rows") + n("numCopiedRows") + n("num_target_rows_copied") + n("numTargetRowsCopied")
    return (
        (2 * copied if from_log else 0)
        + n("num_added_rows")
        + n("numOutputRows")
        + n("num_deleted_rows")
        + n("numDeletedRows")
        + n("num_target_rows_inserted")
        + n("num_target_rows_deleted")
        + 2 * updated
    ) or 1


def rewrote(entry: dict) -> bool:
    """Whether the commit rewrote existing rows: an overwrite, or files removed."""
    metrics = entry.get("operationMetrics") or {}
    removed = (metrics.get(k) for k in ("num_removed_files", "numRemovedFiles", "numTargetFilesRemoved"))
    return (entry.get("operationParameters") or {}).get("mode") == "Overwrite" or any(int(n or 0) for n in removed)
