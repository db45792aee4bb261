"""Staging the next batch while Spark writes this one.

In a catch-up, batches alternate between the coordinator, which reads Delta and stages each span's changes
on one core, and Spark, which runs a task per span on every core. The next batch is known before it is
recorded as an intent: it is what the cut gives once this batch is done. So its tables are staged in the
background meanwhile, and when the intent is recorded, each table whose version range is the one staged
takes those files. A range fixes what is staged (its event timestamps are recorded once and never change),
so a table staged ahead is the same as one staged when its intent comes. A guess that turns out wrong (new
versions made the batch larger) costs only the work: the table is staged again.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from feedctl.source.delta import DeltaSource
from feedctl.source.stage import Staged, Stager
from feedctl.state.progress import Recorded


@dataclass(frozen=True)
class NextBatch:
    """The batch expected after the one running: its sequence number, ranges and their event timestamps."""

    batch_seq: int
    ranges: dict[str, tuple[int, int]]
    recorded: dict[str, list[Recorded]]

    @staticmethod
    def of(batch_seq: int, ranges: dict[str, tuple[int, int]], pending: list[Recorded]) -> NextBatch:
        return NextBatch(batch_seq, ranges, {t: [r for r in pending if r.table == t and a < r.version <= b]
                                             for t, (a, b) in ranges.items()})


class StageAhead:
    """One batch staged ahead, a table at a time, on a thread of its own."""

    def __init__(self, stager: Stager):
        self.stager = stager
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="feedctl-stage-ahead")
        # Handles of its own: a delta-rs table is refreshed in place, so it is not shared across threads.
        self._sources = {t: DeltaSource(s.name, s.location, s.storage_options) for t, s in stager.sources.items()}
        self._staged: dict[tuple[str, int, int], tuple[str, Future]] = {}

    def start(self, batch: NextBatch) -> None:
        self._drop_unused()
        folder = self.stager.folder(batch.batch_seq)
        for table, (after, up_to) in sorted(batch.ranges.items()):
            self._staged[(table, after, up_to)] = (f"{folder}/{table}", self._pool.submit(
                self.stager.stage, table, after, up_to, batch.recorded[table], folder, self._sources[table]))

    def take(self, table: str, after: int, up_to: int) -> Staged | None:
        """The table's changes for this range if they were staged ahead (None: stage them now; a failure
        ahead is left for that staging to meet, report and retry)."""
        found = self._staged.pop((table, after, up_to), None)
        if found is None:
            return None
        try:
            return found[1].result()
        except Exception:
            self.stager.area.remove(found[0])
            return None

    def close(self) -> None:
        self._drop_unused()
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _drop_unused(self) -> None:
        """Forget what was staged for a batch that came out otherwise, removing its files once written."""
        for folder, future in self._staged.values():
            future.cancel()
            future.add_done_callback(lambda _, folder=folder: self.stager.area.remove(folder))
        self._staged.clear()
