"""The coordinator lease of a job: who holds it, and a heartbeat that keeps it while a runner works.

A holder is `<node id>/<pid>`, as the node registers itself (`state/nodes.py`). A lease is free when it has
expired, or when its holder is not a live node: a node that died, was stopped past the liveness TTL or left
gives up its jobs at once, while two live runners never share a job. Every write that moves a job carries
the lease's epoch, so a holder that lost the lease moves nothing.
"""

from __future__ import annotations

import os
import threading

from feedctl.state import jobs
from feedctl.state.store import StateStore


def holder_id(node_id: str) -> str:
    return f"{node_id}/{os.getpid()}"


class Heartbeat:
    """Renews the lease every third of its time to live; `lost` is set if another runner took it."""

    def __init__(self, store: StateStore, job_id: int, holder: str, epoch: int, ttl: float):
        self.store, self.job_id, self.holder, self.epoch, self.ttl = store, job_id, holder, epoch, ttl
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"lease-{job_id}", daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _beat(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            try:
                with self.store.transaction() as conn:
                    jobs.renew_lease(conn, self.job_id, self.holder, self.epoch, self.ttl)
            except jobs.LeaseLost:
                self.lost.set()
                return
            except Exception:  # the state store is busy or away for a moment: try again next beat
                continue
