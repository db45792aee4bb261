"""Staging the next batch while Spark writes this one.

In a catch-up, batches alternate between the node, which reads Delta and stages its spans' changes on one
core, and Spark, which runs a task per span on every core. The coordinator cuts batches ahead of what the
spans have emitted, so the next batch is known while this one runs: its tables are staged in the background
meanwhile, and when its turn comes, each table whose version range and spans are the ones staged takes
those files. A range fixes what is staged (its event timestamps are recorded once and never change),
so a table staged ahead is the same as one staged when its turn comes. Staging that turns out unused (a
span moved to another node meanwhile) costs only the work.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from feedctl.source.stage import Layout, Staged, Stager
from feedctl.state.event_times import Recorded


@dataclass(frozen=True)
class NextBatch:
    """The batch after the one running: its sequence number, ranges, their event timestamps, the spans of each
    table this node emits, and how each table's rows are placed in spans."""

    batch_seq: int
    ranges: dict[str, tuple[int, int]]
    recorded: dict[str, list[Recorded]]
    spans: dict[str, list[int]]
    layouts: dict[str, Layout]


# Changes of a table (as its commits recorded them) worth staging ahead: fewer stage in milliseconds when
# their turn comes, and a node whose hundreds of feeds staged each small batch ahead kept hundreds of threads
# busy beside their runners.
AHEAD_ROWS = 10_000


class StageAhead:
    """One batch staged ahead, a table at a time, on a thread of its own."""

    def __init__(self, stager: Stager, worth: int = AHEAD_ROWS):
        self.stager, self.worth = stager, worth  # `worth`: the changes of a table staged ahead, at least
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="feedctl-stage-ahead")
        # Handles of its own: a delta-rs table is refreshed in place, so it is not shared across threads.
        self._sources = {t: s.handle() for t, s in stager.sources.items()}
        self._staged: dict[tuple[str, int, int, tuple[int, ...]], Future] = {}

    def start(self, batch: NextBatch) -> None:
        self._drop_unused()
        for table, (after, up_to) in sorted(batch.ranges.items()):
            keep = batch.spans.get(table)
            if keep and sum(r.rows for r in batch.recorded.get(table, [])) >= self.worth:
                self._staged[(table, after, up_to, tuple(keep))] = self._pool.submit(
                    self.stager.stage,
                    table,
                    after,
                    up_to,
                    batch.recorded[table],
                    batch.batch_seq,
                    batch.layouts[table],
                    self._sources[table],
                    keep,
                )

    def take(self, table: str, after: int, up_to: int, keep: list[int]) -> Staged | None:
        """The table's changes for this range and these spans if they were staged ahead (None: stage them
        now; a failure ahead is left for that staging to meet, report and retry)."""
        found = self._staged.pop((table, after, up_to, tuple(keep)), None)
        if found is None:
            return None
        try:
            return found.result()
        except Exception:  # its files were removed as it failed
            return None

    def close(self) -> None:
        self._drop_unused()
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _drop_unused(self) -> None:
        """Forget what was staged for a batch that came out otherwise, removing its files once written."""
        for future in self._staged.values():
            future.cancel()
            future.add_done_callback(lambda f: f.cancelled() or f.exception() or self.stager.drop(f.result()))
        self._staged.clear()
