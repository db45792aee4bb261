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
from dataclasses import dataclass

from sqlalchemy.engine import Connection, Row

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


def left_to_peer(held: dict[str, int], holder: str, peers: set[str]) -> bool:
    """Whether `holder` leaves a job to one of `peers` holding fewer leases than it does (`held`): two fewer,
    or a twentieth of its leases fewer where that is more. Nodes then share the jobs, rather than the first
    to look taking most of them and its Python bounding their latency; and a few leases' difference among
    hundreds moves no job: with two, three nodes sharing 1,000 jobs handed jobs over 736 times in 18 minutes,
    288 of them in the two minutes after their last feeds started."""
    mine = held.get(holder, 0)
    return any(held.get(peer, 0) + max(2, mine // 20) <= mine for peer in peers - {holder})


def could_coordinate(
    members: list[nodes.Node], feed: str, wanted: str | None, now: float, ttl: float, published: set[str] | None = None
) -> set[str]:
    """The lease holders of the live nodes working `feed` within its execution locality (`wanted`); with
    `published`, only those whose runner of the feed published its view of it (their ids)."""
    return {
        n.holder
        for n in members
        if n.live(now, ttl)
        and feed in n.feeds
        and (published is None or n.node_id in published)
        and (not wanted or locality.matches(wanted, n.locality))
    }


@dataclass(frozen=True)
class Sharing:
    """A --follow node's coordinator sharing its job with its peers (`job_share`): the job's feed, and the
    feed's execution locality."""

    feed: str
    wanted: str | None = None


@dataclass(frozen=True)
class Look:
    """A coordinator's look at its job's lease, to claim it for `lease_ttl` if it is free (`claim`)."""

    job_id: int
    holder: str
    lease_ttl: float
    liveness_ttl: float
    sharing: Sharing | None = None  # leaving a free lease to a peer holding fewer


@dataclass
class Field:
    """What the looks at many leases read, in a few statements whatever their number: the leases, the nodes,
    and for those sharing, how many leases each holder holds and which nodes published their view of which
    feeds."""

    now: float
    leases: dict[int, Row]
    members: list[nodes.Node]
    held: dict[str, int]
    published: dict[str, set[str]]  # feed -> ids of the nodes whose runner of it published its view

    @classmethod
    def read(cls, conn: Connection, job_ids: list[int], feeds: set[str]) -> Field:
        return cls(
            time.time(),
            jobs.leases_of(conn, sorted(set(job_ids))),
            nodes.list_nodes(conn),
            jobs.leases_held(conn) if feeds else {},
            nodes.published(conn, sorted(feeds)) if feeds else {},
        )

    @classmethod
    def of(cls, conn: Connection, looks: list[Look]) -> Field:
        return cls.read(conn, [each.job_id for each in looks], {e.sharing.feed for e in looks if e.sharing})

    def peers(self, sharing: Sharing, ttl: float) -> set[str]:
        """The live nodes that could coordinate a job of `sharing.feed`, as lease holders."""
        return could_coordinate(
            self.members, sharing.feed, sharing.wanted, self.now, ttl, self.published.get(sharing.feed, set())
        )

    def decide(self, look: Look) -> Claim | None:
        """A `Claim` of nothing (another live node holds the lease, or it is left to a peer), or None where
        the lease is free to claim."""
        row = self.leases.get(look.job_id)
        alive = {n.holder for n in self.members if n.live(self.now, look.liveness_ttl)}
        if row is None or not jobs.free_to(row, look.holder, lambda other: other not in alive, self.now):
            return Claim(None)
        if (
            look.sharing is not None
            and row.coordinator != look.holder
            and left_to_peer(self.held, look.holder, self.peers(look.sharing, look.liveness_ttl))
        ):
            return Claim(None, left=True)
        return None


def look(conn: Connection, looks: list[Look]) -> list[Claim | None]:
    """What each look finds, in one snapshot: `Field.decide`."""
    field = Field.of(conn, looks)
    return [field.decide(each) for each in looks]


def take(conn: Connection, looks: list[Look]) -> list[Claim]:
    """Claim each lease its look finds free, deciding again in this transaction, the claims made before it in
    the group counted among the leases held: a statement or two for all of them. The new epochs fence out
    any earlier holder."""
    field = Field.of(conn, looks)
    found: list[Claim | None] = []
    taking: dict[tuple[str, float], list[tuple[int, int]]] = {}
    for each in looks:
        decided = field.decide(each)
        if decided is None:
            row = field.leases.pop(each.job_id)  # a second look at it in the group finds it gone
            taking.setdefault((each.holder, each.lease_ttl), []).append((each.job_id, row.lease_epoch))
            field.held[each.holder] = field.held.get(each.holder, 0) + 1
        found.append(decided)
    epochs: dict[int, int] = {}
    for (holder, ttl), leases in taking.items():
        taken = jobs.take_leases(conn, leases, holder, ttl)
        epochs |= {job_id: epoch + 1 for job_id, epoch in leases if job_id in taken}
    return [Claim(epochs.get(each.job_id)) if decided is None else decided for each, decided in zip(looks, found)]


def claim(store: StateStore, mine: Look, looks: GroupCommit | None = None, takes: GroupCommit | None = None) -> Claim:
    """The job's lease (its epoch), when it is free or its holder is not a live node: a node that died or left
    gives up its jobs at once, not when their leases expire. Most looks find another live node holding it:
    they read a snapshot, so that they hold no write lock (SQLite's is one for the whole store). On a --follow
    node, its coordinators looking meanwhile share one snapshot (`looks`), and those claiming one transaction
    (`takes`): 1,000 starting at once otherwise waited past the pool's timeout for a connection. Sharing, a
    lease that is free, and not already this holder's, is left to a peer holding fewer (`left_to_peer`)."""
    if looks is not None:
        seen = looks.run(mine.job_id, mine)
    else:
        with store.reading() as conn:
            [seen] = look(conn, [mine])
    if seen is not None:
        return seen
    if takes is not None:  # again: the snapshot's counts miss the claims made since
        return takes.run(mine.job_id, mine)
    with store.transaction() as conn:
        [taken] = take(conn, [mine])
    return taken


def shed(
    store: StateStore, job_id: int, holder: str, epoch: int, lease_ttl: float, liveness_ttl: float, sharing: Sharing
) -> str | None:
    """Hand the job's lease, held at `epoch`, to the peer holding the fewest leases, if `holder` would leave it
    the job (`left_to_peer`): the peer it went to, or None. Decided again in the hand's transaction, among the
    hands of this node's other jobs."""
    with store.reading() as conn:  # most looks find the nodes even: no write lock
        field = Field.read(conn, [], {sharing.feed})
        if not left_to_peer(field.held, holder, field.peers(sharing, liveness_ttl)):
            return None
    with store.transaction() as conn:
        field = Field.read(conn, [], {sharing.feed})
        others = field.peers(sharing, liveness_ttl) - {holder}
        if not left_to_peer(field.held, holder, others):
            return None
        to = min(others, key=lambda peer: (field.held.get(peer, 0), peer))
        return to if jobs.hand_lease(conn, job_id, epoch, to, lease_ttl) else None


@dataclass(frozen=True)
class Standing:
    """How many leases each holder holds, and the nodes, as a node's renewal of its leases last read them."""

    held: dict[str, int]
    nodes: list[nodes.Node]

    def may_shed(self, holder: str, feed: str, wanted: str | None, liveness_ttl: float) -> bool:
        """Whether `holder` may hand a job of `feed` to a peer (`shed`, which decides in the store): a live
        node working the feed, within the feed's execution locality (`wanted`), holds fewer leases (`left_to_peer`). Its
        runner may not have published its view of the feed yet: `shed` looks. False spares `shed`'s read,
        which a node's every coordinator made every 15-45 s: most looks find the nodes even."""
        candidates = could_coordinate(self.nodes, feed, wanted, time.time(), liveness_ttl)
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
    time to live for all of them, of one statement, rather than a thread and a transaction per job. A lease
    another node took is dropped from the renewal, and its heartbeat's `lost` set."""

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
