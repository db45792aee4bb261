"""The coordinator lease of a job: who holds it, and a heartbeat that keeps it while a runner works.

A holder is `<node id>/<pid>`, as the node registers itself (`state/nodes.py`). A lease is free when it has
expired, or when its holder is not a live node: a node that died, was stopped past the liveness TTL or left
gives up its jobs at once, while two live runners never share a job. Every write that moves a job carries
the lease's epoch, so a holder that lost the lease moves nothing.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.engine import Connection

from feedctl.coordinator import locality
from feedctl.state import jobs, nodes
from feedctl.state.group_commit import GroupCommit
from feedctl.state.store import StateStore


def holder_id(node_id: str) -> str:
    return f"{node_id}/{os.getpid()}"


@dataclass(frozen=True)
class Claim:
    epoch: int | None  # the lease's epoch, once claimed
    left: bool = False  # free, and left for a while to a peer holding fewer leases (`left_to_peer`)


# The live nodes that could coordinate a job, as lease holders, read in a transaction.
Peers = Callable[[Connection], set[str]]


def left_to_peer(held: dict[str, int], holder: str, peers: set[str]) -> bool:
    """Whether `holder` leaves a job to one of `peers` holding at least two fewer leases than it does (`held`).
    Nodes then share the jobs, rather than the first to look taking most of them and its Python bounding
    their latency."""
    mine = held.get(holder, 0)
    return any(held.get(peer, 0) + 1 < mine for peer in peers - {holder})


@dataclass(frozen=True)
class Look:
    """A look at a job's lease before claiming it (`claim`)."""

    job_id: int
    holder: str
    liveness_ttl: float
    peers: Peers | None = None


def look(conn: Connection, looks: list[Look]) -> list[Claim | None]:
    """What each look finds, in one snapshot and a few statements whatever their number: a `Claim` of nothing
    (another live node holds the lease, or it is left to a peer), or None where the lease is free to claim."""
    now = time.time()
    live = {ttl: nodes.live_holders(conn, ttl) for ttl in {each.liveness_ttl for each in looks}}
    leases = jobs.leases_of(conn, sorted({each.job_id for each in looks}))
    held = jobs.leases_held(conn) if any(each.peers is not None for each in looks) else {}
    found: list[Claim | None] = []
    for each in looks:
        row, alive = leases.get(each.job_id), live[each.liveness_ttl]
        if row is None or not jobs.free_to(row, each.holder, lambda other: other not in alive, now):
            found.append(Claim(None))
        elif (
            each.peers is not None
            and row.coordinator != each.holder
            and left_to_peer(held, each.holder, each.peers(conn))
        ):
            found.append(Claim(None, left=True))
        else:
            found.append(None)
    return found


def claim(
    store: StateStore,
    job_id: int,
    holder: str,
    lease_ttl: float,
    liveness_ttl: float,
    peers: Peers | None = None,
    looks: GroupCommit | None = None,
) -> Claim:
    """The job's lease (its epoch), when it is free or its holder is not a live node: a node that died or left
    gives up its jobs at once, not when their leases expire. Most looks find another live node holding it:
    they read a snapshot, so that they hold no write lock (SQLite's is one for the whole store); on a --follow
    node (`looks`), one snapshot shared by its coordinators looking meanwhile: 1,000 starting at once otherwise
    waited past the pool's timeout for a connection. With `peers`, a lease that is free, and not already this
    holder's, is left to a peer holding fewer (`left_to_peer`)."""
    mine = Look(job_id, holder, liveness_ttl, peers)
    if looks is not None:
        seen = looks.run(job_id, mine)
    else:
        with store.reading() as conn:
            [seen] = look(conn, [mine])
    if seen is not None:
        return seen
    with store.transaction() as conn:  # again: the snapshot's counts miss the claims made since
        if _left(conn, job_id, holder, peers):
            return Claim(None, left=True)
        live = nodes.live_holders(conn, liveness_ttl)
        return Claim(jobs.claim_lease(conn, job_id, holder, lease_ttl, lambda other: other not in live))


def _left(conn: Connection, job_id: int, holder: str, peers: Peers | None) -> bool:
    if peers is None or jobs.get_job(conn, job_id).coordinator == holder:
        return False
    return left_to_peer(jobs.leases_held(conn), holder, peers(conn))


def shed(store: StateStore, job_id: int, holder: str, epoch: int, lease_ttl: float, peers: Peers) -> str | None:
    """Hand the job's lease, held at `epoch`, to the peer holding the fewest leases, if `holder` would leave it
    the job (`left_to_peer`): the peer it went to, or None. Decided again in the hand's transaction, among the
    hands of this node's other jobs."""
    with store.reading() as conn:  # most looks find the nodes even: no write lock
        if not left_to_peer(jobs.leases_held(conn), holder, peers(conn)):
            return None
    with store.transaction() as conn:
        held, others = jobs.leases_held(conn), peers(conn) - {holder}
        if not left_to_peer(held, holder, others):
            return None
        to = min(others, key=lambda peer: (held.get(peer, 0), peer))
        return to if jobs.hand_lease(conn, job_id, epoch, to, lease_ttl) else None


@dataclass(frozen=True)
class Standing:
    """How many leases each holder holds, and the nodes, as a node's renewal of its leases last read them."""

    held: dict[str, int]
    nodes: list[nodes.Node]

    def may_shed(self, holder: str, feed: str, wanted: str | None, liveness_ttl: float) -> bool:
        """Whether `holder` may hand a job of `feed` to a peer (`shed`, which decides in the store): a live
        node working the feed, within the feed's execution locality (`wanted`), holds two fewer leases. Its
        runner may not have published its view of the feed yet: `shed` looks. False spares `shed`'s read,
        which a node's every coordinator made every 15-45 s: most looks find the nodes even."""
        now = time.time()
        candidates = {
            n.holder
            for n in self.nodes
            if n.live(now, liveness_ttl) and feed in n.feeds and (not wanted or locality.matches(wanted, n.locality))
        }
        return left_to_peer(self.held, holder, candidates)


class Renewal:
    """A thread renewing something in the state store every third of its time to live, until the block
    ends; `lost` is set, and renewing stops, when `renew` raises `lost_on` (another process took it)."""

    lost_on: type[Exception]

    def __init__(self, store: StateStore, ttl: float, name: str):
        self.store, self.ttl = store, ttl
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=name, daemon=True)

    def renew(self, conn) -> None:
        raise NotImplementedError

    def lose(self) -> None:
        self.lost.set()

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _beat(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            try:
                with self.store.transaction(node=True) as conn:
                    self.renew(conn)
            except self.lost_on:
                self.lose()
                return
            except Exception:  # the state store is busy or away for a moment: try again next beat
                continue


class Heartbeat(Renewal):
    """Keeps the job's coordinator lease; `lost` is set if another runner took it, and `wake` with it: a
    coordinator napping until its next look (minutes for a steady job) stands by at once. With `leases`, the
    node's renewal keeps it, with the others it holds."""

    lost_on = jobs.LeaseLost

    def __init__(
        self,
        store: StateStore,
        job_id: int,
        holder: str,
        epoch: int,
        ttl: float,
        leases: Leases | None = None,
        wake: threading.Event | None = None,
    ):
        super().__init__(store, ttl, f"lease-{job_id}")
        self.job_id, self.holder, self.epoch = job_id, holder, epoch
        self.leases, self.wake = leases, wake

    def lose(self) -> None:
        super().lose()
        if self.wake is not None:
            self.wake.set()

    def renew(self, conn) -> None:
        jobs.renew_lease(conn, self.job_id, self.holder, self.epoch, self.ttl)

    def __enter__(self):
        if self.leases is None:
            return super().__enter__()
        self.leases.hold(self)
        return self

    def __exit__(self, *exc):
        if self.leases is None:
            return super().__exit__(*exc)
        self.leases.drop(self)


class Leases(Renewal):
    """The coordinator leases a --follow node holds, renewed together: one transaction every third of their
    time to live for all of them, of one statement per few hundred leases, rather than a thread and a
    transaction per job. A lease another node took is dropped from the renewal, and its heartbeat's `lost`
    set."""

    lost_on = ()  # a lease lost is its own heartbeat's

    def __init__(self, store: StateStore, ttl: float):
        super().__init__(store, ttl, "leases")
        self._held: dict[int, Heartbeat] = {}
        self._lock = threading.Lock()
        self.standing: Standing | None = None  # as the last renewal read it, for the coordinators' `shed`

    def hold(self, beat: Heartbeat) -> None:
        with self._lock:
            self._held[beat.job_id] = beat

    def drop(self, beat: Heartbeat) -> None:
        with self._lock:
            if self._held.get(beat.job_id) is beat:
                del self._held[beat.job_id]

    def renew(self, conn) -> None:
        with self._lock:
            held = list(self._held.values())
        by_holder: dict[str, list[Heartbeat]] = {}
        for beat in held:
            by_holder.setdefault(beat.holder, []).append(beat)
        for holder, beats in by_holder.items():
            renewed = jobs.renew_leases(conn, [(b.job_id, b.epoch) for b in beats], holder, self.ttl)
            for beat in beats:
                if beat.job_id not in renewed:  # taken over: the others' renewals commit
                    beat.lose()
                    self.drop(beat)
        self.standing = Standing(jobs.leases_held(conn), nodes.list_nodes(conn))
