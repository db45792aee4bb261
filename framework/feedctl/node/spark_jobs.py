"""The node's Spark jobs: the batches of its feeds that are due together go to Spark as one job.

A Spark job has a fixed cost (scheduling, a task per core, the tasks' Python workers) that a small batch does
not amortize: a node with a hundred feeds over a few tables would otherwise run a hundred jobs for one commit
to each table. Feeds hand their staged batches here (`run`) and wait; the first of them finding fewer than
`at_once` jobs running takes every batch waiting and runs them together (the others run the job after it,
together again), as a database's group commit does. Each batch keeps its own tasks, sink and results; a
task's error is its result (`tasks.batch.run_shared`), so a failing sink fails its own feed's batch alone.
A job that Spark itself fails (a query's error in the JVM, an executor lost) is run again batch by batch, so
that its failure reaches only the batches it belongs to.

A batch smaller than that fixed cost (`here_rows` changes or fewer, no CDC query, no scan) is written by the
node itself, through the same task body, where the executors would share its disk anyway (a local master):
over a hundred feeds with a commit a second, Spark's jobs were most of the node's work.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from feedctl.tasks.batch import TableBatch, outcome, run_here, run_shared, small
from feedctl.tasks.shared_views import SharedViews

AT_ONCE = 2  # jobs running together: one long batch (a scan) does not hold back every other feed


@dataclass
class _Batch:
    session: Callable  # gives the Spark session
    tables: list[TableBatch]
    records: list[dict] = field(default_factory=list)
    error: BaseException | None = None
    done: bool = False


class SparkJobs:
    def __init__(self, at_once: int = AT_ONCE, here_rows: int = 0):
        self.at_once = at_once
        self.here_rows = here_rows  # a batch of no more changes is written here, without Spark (0: never)
        self.here = 0  # batches written here
        self.views = SharedViews()  # their shared stagings' spans, paired once for the node's feeds
        self._changed = threading.Condition()
        self._waiting: list[_Batch] = []
        self._running = 0

    def run(self, session: Callable, tables: list[TableBatch]) -> list[dict]:
        """Emit `tables` (one feed's batch), in a Spark job shared with the batches of other feeds due now;
        returns one record per file written, or raises what its tasks met (`tasks.batch.outcome`)."""
        if self.here_rows and small(tables, self.here_rows):
            self.here += 1
            return outcome(run_here(tables, self.views), 0)
        mine = _Batch(session, tables)
        with self._changed:
            self._waiting.append(mine)
            while not mine.done:
                if self._running < self.at_once and self._waiting:
                    group, self._waiting = self._waiting, []
                    self._running += 1
                    self._changed.release()
                    try:
                        _run(group)
                    finally:
                        self._changed.acquire()
                        self._running -= 1
                        self._changed.notify_all()
                else:
                    self._changed.wait()
        if mine.error is not None:
            raise mine.error
        return mine.records


def _run(group: list[_Batch]) -> None:
    """One Spark job for the group's batches; again batch by batch if Spark fails it."""
    try:
        records = run_shared(group[0].session(), [b.tables for b in group])
    except BaseException as exc:
        if len(group) > 1 and isinstance(exc, Exception):
            for alone in group:
                _run([alone])
            return
        for b in group:
            b.error, b.done = exc, True
        return
    for owner, b in enumerate(group):
        try:
            b.records = outcome(records, owner)
        except Exception as exc:
            b.error = exc
        b.done = True
