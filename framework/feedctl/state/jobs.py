"""Jobs: their rows, status transitions and coordinator leases. Functions take an open transaction."""

from __future__ import annotations

import json
import re
import secrets
import time
from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple, Protocol

from sqlalchemy import Float, and_, bindparam, case, func, insert, or_, select, true, update
from sqlalchemy.engine import Connection, Row

from feedctl.state.many_rows import among, fetch_of, updated
from feedctl.state.schema import jobs, table_positions
from feedctl.units import Hlc


class Definition(Protocol):
    """What a job records of itself (`job/definition.py`'s `JobDefinition`): the store keeps its JSON as text
    and reads it back as text; `job.definition.definition_of` decodes it."""

    def to_json(self) -> dict: ...


class JobStatus(StrEnum):
    """A job's status, as the store holds it (a string: it compares equal to its value)."""

    RUNNING = "running"
    PAUSED = "paused"  # by the user, or by an error under `on_error: pause`; `resume` runs it again
    FAILED = "failed"
    SUCCEEDED = "succeeded"  # it reached its end_time, or finished its `initial_scan: only`
    CANCELED = "canceled"


ACTIVE = (JobStatus.RUNNING, JobStatus.PAUSED)
TERMINAL = (JobStatus.FAILED, JobStatus.SUCCEEDED, JobStatus.CANCELED)


class JobError(Exception):
    """A job-control request that cannot be done (unknown job, wrong status)."""


class JobExists(Exception):
    """The feed's version has a running or paused job already."""

    def __init__(self, job: "Job"):
        super().__init__(f"feed {job.label} has job {job.job_id} ({job.status})")
        self.job = job


class LeaseLost(Exception):
    """Another runner took the job's lease: this one must stop touching the job."""


class NotRunning(Exception):
    """The user paused or canceled the job while a step was in flight: its high-water mark stays put."""

    def __init__(self, status: str):
        super().__init__(f"{status} while running")
        self.status = status


@dataclass(frozen=True)
class Job:
    job_id: int
    feed: str
    version: int  # the feed's contract version it emits (`version:`): a feed's versions run side by side
    status: JobStatus
    definition_hash: str
    definition_json: str  # the job's definition as stored: `job.definition.definition_of(job)` decodes it
    sink_uri: str
    created_at: float
    modified_at: float
    finished_at: float | None
    start: Hlc
    high_water: Hlc
    resolved: Hlc
    resolved_at: float | None
    checkpoint_at: float | None
    note: str  # what a running job meets that `feedctl jobs` says (an outage, a node refusing it); "" mostly
    error: str
    coordinator: str | None
    lease_expires_at: float | None
    lease_epoch: int
    initial_scan_done: bool

    @property
    def running_status(self) -> str:
        """What the job is doing, as `feedctl jobs` says it: derived when read, never stored but for the note."""
        if self.status != JobStatus.RUNNING:
            return self.note
        return self.note or f"running: high-water={self.high_water}"

    @staticmethod
    def from_row(row) -> "Job":
        m = row._mapping
        return Job(
            job_id=m["job_id"],
            feed=m["feed"],
            version=m["version"],
            status=JobStatus(m["status"]),
            definition_hash=m["definition_hash"],
            definition_json=m["definition"],
            sink_uri=m["sink_uri"],
            created_at=m["created_at"],
            modified_at=m["modified_at"],
            finished_at=m["finished_at"],
            start=Hlc(m["start_wall"], m["start_logical"]),
            high_water=Hlc(m["high_water_wall"], m["high_water_logical"]),
            resolved=Hlc(m["resolved_wall"], m["resolved_logical"]),
            resolved_at=m["resolved_at"],
            checkpoint_at=m["checkpoint_at"],
            note=m["running_status"],
            error=m["error"],
            coordinator=m["coordinator"],
            lease_expires_at=m["lease_expires_at"],
            lease_epoch=m["lease_epoch"],
            initial_scan_done=bool(m["initial_scan_done"]),
        )

    @property
    def label(self) -> str:
        """The feed, and its version past the first: `orders`, `orders@v2`."""
        return version_label(self.feed, self.version)


def stored(definition: Definition) -> str:
    """A definition as the store holds it: its JSON, keys sorted, so that one definition is one text."""
    return json.dumps(definition.to_json(), sort_keys=True)


def version_label(feed: str, version: int) -> str:
    return feed if version == 1 else f"{feed}@v{version}"


_LABEL = re.compile(r"^(?P<feed>.+)@v(?P<version>[0-9]+)$")


def new_job_id() -> int:
    # Like CockroachDB's job ids: large, positive, unique without coordination.
    return (int(time.time() * 1000) << 20 | secrets.randbits(20)) & ((1 << 63) - 1)


def create_job(
    conn: Connection,
    feed: str,
    definition_hash: str,
    definition: Definition,
    sink_uri: str,
    start: Hlc,
    tables: dict[str, tuple[int, int]],
    version: int = 1,
) -> Job:
    """A running job of the feed's contract `version` starting at `start`; `tables` maps each table to (last
    emitted version, spans). Raises JobExists when that version has a running or paused job already (another
    node created it first); where two transactions could both get past that look-up, the unique index
    `one_active_job_per_version` fails one."""
    active = conn.execute(
        select(jobs).where(and_(jobs.c.feed == feed, jobs.c.version == version, jobs.c.status.in_(ACTIVE)))
    ).first()
    if active is not None:
        raise JobExists(Job.from_row(active))
    now = time.time()
    job_id = new_job_id()
    conn.execute(
        insert(jobs).values(
            job_id=job_id,
            feed=feed,
            version=version,
            status=JobStatus.RUNNING,
            definition_hash=definition_hash,
            definition=stored(definition),
            sink_uri=sink_uri,
            created_at=now,
            modified_at=now,
            start_wall=start.wall,
            start_logical=start.logical,
            high_water_wall=0,
            high_water_logical=0,
            resolved_wall=0,
            resolved_logical=0,
            running_status="",
            error="",
            lease_epoch=0,
            initial_scan_done=0,
        )
    )
    for table, (version, spans) in tables.items():
        conn.execute(insert(table_positions).values(job_id=job_id, table_name=table, version=version, spans=spans))
    return get_job(conn, job_id)


# Built once: a coordinator's step reads its job several times, and building a statement costs four times
# executing it.
_JOB = select(jobs).where(jobs.c.job_id == bindparam("job_id"))


def get_job(conn: Connection, job_id: int) -> Job:
    row = conn.execute(_JOB, {"job_id": job_id}).first()
    if row is None:
        raise JobError(f"no job {job_id}")
    return Job.from_row(row)


class Marks(NamedTuple):
    """A job's high-water mark and resolved timestamp, read without the rest of its row."""

    high_water: Hlc
    resolved: Hlc
    resolved_at: float | None


def marks(conn: Connection, job_id: int) -> Marks:
    c = jobs.c
    row = conn.execute(
        select(c.high_water_wall, c.high_water_logical, c.resolved_wall, c.resolved_logical, c.resolved_at).where(
            c.job_id == job_id
        )
    ).first()
    if row is None:
        raise JobError(f"no job {job_id}")
    return Marks(Hlc(row[0], row[1]), Hlc(row[2], row[3]), row[4])


def get_jobs(conn: Connection, job_ids) -> dict[int, Job]:
    """Many jobs by id, read in one statement; an id of no job is left out."""
    return {row.job_id: Job.from_row(row) for row in fetch_of(conn, select(jobs), jobs.c.job_id, list(job_ids))}


def list_jobs(conn: Connection) -> list[Job]:
    return [Job.from_row(r) for r in conn.execute(select(jobs).order_by(jobs.c.created_at, jobs.c.job_id))]


def newest_job(conn: Connection, feed: str, version: int | None = None) -> Job | None:
    """The newest job of the feed's `version` (None: of any), whatever its status: the one `run` continues,
    or skips."""
    cond = jobs.c.feed == feed if version is None else and_(jobs.c.feed == feed, jobs.c.version == version)
    row = conn.execute(select(jobs).where(cond).order_by(jobs.c.created_at.desc(), jobs.c.job_id.desc())).first()
    return Job.from_row(row) if row else None


def other_versions(conn: Connection, feed: str, version: int) -> list[Job]:
    """The running or paused jobs of the feed's versions other than `version` (earlier ones, or a later one
    after a rollback): they run on, each from its own definition into its own location, until canceled."""
    cond = and_(jobs.c.feed == feed, jobs.c.version != version, jobs.c.status.in_(ACTIVE))
    return [Job.from_row(r) for r in conn.execute(select(jobs).where(cond).order_by(jobs.c.version))]


def parse_label(ref: str) -> tuple[str, int | None]:
    """`orders@v2` → (orders, 2); `orders` → (orders, None: any version)."""
    label = _LABEL.match(ref)
    return (label["feed"], int(label["version"])) if label else (ref, None)


def find_job(conn: Connection, ref: str) -> Job:
    """A job by id; the newest job of a feed by name; or of one of its versions, `orders@v1`."""
    if ref.isdigit():
        return get_job(conn, int(ref))
    row = newest_job(conn, *parse_label(ref))
    if row is None:
        raise JobError(f'no job for feed "{ref}" (feedctl run creates it)')
    return row


_TRANSITIONS = {
    "pause": ({JobStatus.RUNNING}, JobStatus.PAUSED),
    "resume": ({JobStatus.PAUSED}, JobStatus.RUNNING),
    "cancel": ({JobStatus.RUNNING, JobStatus.PAUSED}, JobStatus.CANCELED),
}


def control(conn: Connection, job: Job, action: str) -> Job:
    """pause, resume or cancel; a running runner notices at its next step and stops."""
    allowed, target = _TRANSITIONS[action]
    if job.status not in allowed:
        raise JobError(f"cannot {action} job {job.job_id} ({job.label}): it is {job.status}")
    values = {"status": target, "modified_at": time.time(), "running_status": ""}  # what it said ran no more
    if action == "resume":
        values["error"] = ""
    if target in TERMINAL:
        values["finished_at"] = time.time()
    conn.execute(update(jobs).where(jobs.c.job_id == job.job_id).values(**values))
    return get_job(conn, job.job_id)


def finish(conn: Connection, job_id: int, status: JobStatus, error: str = "", epoch: int | None = None) -> bool:
    """Move a running job to paused, failed or succeeded (by the runner holding its lease). A job paused
    or canceled by the user meanwhile keeps that status; returns whether the move happened."""
    cond = and_(jobs.c.job_id == job_id, jobs.c.status == JobStatus.RUNNING)
    if epoch is not None:
        cond = and_(cond, jobs.c.lease_epoch == epoch)
    values = {"status": status, "error": error, "modified_at": time.time(), "running_status": ""}
    if status in TERMINAL:
        values["finished_at"] = time.time()
    return conn.execute(update(jobs).where(cond).values(**values)).rowcount == 1


_LEASE = (
    jobs.c.job_id,
    jobs.c.coordinator,
    jobs.c.lease_expires_at,
    jobs.c.lease_epoch,
)  # a lease as a look and a claim read it


def _lease(conn: Connection, job_id: int, holder: str, can_take) -> Row | None:
    """The job's lease row when `holder` may take it: free, its own, expired, or `can_take(its holder)`."""
    row = conn.execute(select(*_LEASE).where(jobs.c.job_id == job_id)).first()
    return row if row is not None and free_to(row, holder, can_take, time.time()) else None


def leases_of(conn: Connection, job_ids: list[int]) -> dict[int, Row]:
    """The lease rows (coordinator, lease_expires_at, lease_epoch) of many jobs, in one statement."""
    return {row.job_id: row for row in fetch_of(conn, select(*_LEASE), jobs.c.job_id, job_ids)}


def free_to(lease: Row, holder: str, can_take, now: float) -> bool:
    """Whether a lease row is free to `holder`: no holder, its own, expired, or `can_take(its holder)`."""
    return (
        lease.coordinator is None
        or lease.coordinator == holder
        or (lease.lease_expires_at or 0) < now
        or can_take(lease.coordinator)
    )


def leases_held(conn: Connection) -> dict[str, int]:
    """How many running jobs' leases each holder holds: a lease past its time among them, its holder's until
    another takes it. Counted only while unexpired, a node whose renewal came late under load would look as if
    it held fewer, and be handed jobs it would hand back once renewed."""
    rows = conn.execute(
        select(jobs.c.coordinator, func.count())
        .where(and_(jobs.c.status == JobStatus.RUNNING, jobs.c.coordinator.is_not(None)))
        .group_by(jobs.c.coordinator)
    )
    return {holder: n for holder, n in rows}


def claim_lease(conn: Connection, job_id: int, holder: str, ttl: float, can_take=lambda holder: False) -> int | None:
    """Compare-and-swap the coordinator lease; the new epoch fences out any earlier holder. A live lease
    of another holder is taken only when `can_take(that holder)` says so."""
    row = _lease(conn, job_id, holder, can_take)
    if row is None or job_id not in take_leases(conn, [(job_id, row.lease_epoch)], holder, ttl):
        return None
    return row.lease_epoch + 1


def take_leases(conn: Connection, leases: list[tuple[int, int]], holder: str, ttl: float) -> set[int]:
    """Give `holder` the lease of each (job id, lease epoch) of `leases` whose epoch still holds, at the next
    epoch: the ids of the jobs whose lease it took."""
    return update_held(
        conn,
        leases,
        true(),
        {"coordinator": holder, "lease_expires_at": time.time() + ttl, "lease_epoch": jobs.c.lease_epoch + 1},
    )


def renew_lease(conn: Connection, job_id: int, holder: str, epoch: int, ttl: float) -> None:
    done = conn.execute(
        update(jobs)
        .where(and_(jobs.c.job_id == job_id, jobs.c.lease_epoch == epoch, jobs.c.coordinator == holder))
        .values(lease_expires_at=time.time() + ttl)
    )
    if done.rowcount != 1:
        raise LeaseLost(f"job {job_id}: lease epoch {epoch} was taken over")


def update_held(conn: Connection, held: list[tuple[int, int]], condition, values: dict) -> set[int]:
    """`values` into the row of each (job id, lease epoch) of `held` whose epoch still holds the lease and that
    meets `condition`, in one statement: the ids of the jobs written."""
    where = and_(among(conn, (jobs.c.job_id, jobs.c.lease_epoch), held), condition)
    return {job_id for (job_id,) in updated(conn, jobs, where, values, (jobs.c.job_id,))}


# What a job's row takes is named by the parameters of each execution: the columns set vary, the statement not.
_FENCE = update(jobs).where(
    and_(
        jobs.c.job_id == bindparam("fenced_job"),
        jobs.c.lease_epoch == bindparam("fenced_epoch"),
        jobs.c.status == JobStatus.RUNNING,
    )
)


def fence(conn: Connection, held: list[tuple[int, int]], **values) -> set[int]:
    """The one rule of every write a lease fences: `values` into the row of each (job id, lease epoch) whose epoch
    still holds the lease of a running job, in one statement; the ids of the jobs written. The others were
    written nothing, and their writes in the same transaction are the caller's to leave out (`refusal` says
    why). The update locks each row until the transaction ends, so a claim of the lease waits for it
    (PostgreSQL), or cannot be in between (SQLite)."""
    now = time.time()
    if len(held) == 1:  # a statement built once: a coordinator's step of one job fences several times
        [(job_id, epoch)] = held
        done = conn.execute(_FENCE, {"fenced_job": job_id, "fenced_epoch": epoch, "modified_at": now, **values})
        return {job_id} if done.rowcount == 1 else set()
    return update_held(conn, held, jobs.c.status == JobStatus.RUNNING, {"modified_at": now, **values})


def refusal(conn: Connection, job_id: int, epoch: int) -> LeaseLost | NotRunning:
    """Why a write of the job fenced at `epoch` wrote nothing: the job stopped (a paused or canceled job keeps
    the high-water mark the user saw when stopping it; the batch in flight is redone on resume), or another
    node took the lease."""
    row = conn.execute(select(jobs.c.lease_epoch, jobs.c.status).where(jobs.c.job_id == job_id)).first()
    if row is not None and row.lease_epoch == epoch:
        return NotRunning(row.status)
    return LeaseLost(f"job {job_id}: lease epoch {epoch} was taken over; nothing written")


def renew_leases(conn: Connection, held: list[tuple[int, int]], holder: str, ttl: float) -> set[int]:
    """`renew_lease` for many leases of one holder, each (job id, epoch), at once: the ids of the jobs renewed;
    the others' leases were taken over. A statement per lease let go of the interpreter at each: a node's
    renewal of hundreds of leases, under load, came late enough for its own leases to look expired."""
    return update_held(
        conn,
        held,
        jobs.c.coordinator == holder,
        {"lease_expires_at": time.time() + ttl},
    )


def hand_lease(conn: Connection, job_id: int, epoch: int, holder: str, ttl: float) -> bool:
    """Give the lease, as it was at `epoch`, to `holder`, which claims it on its next look (a live holder's
    lease is taken by no other node)."""
    return job_id in take_leases(conn, [(job_id, epoch)], holder, ttl)


def release_lease(conn: Connection, job_id: int, epoch: int) -> None:
    conn.execute(
        update(jobs)
        .where(and_(jobs.c.job_id == job_id, jobs.c.lease_epoch == epoch))
        .values(coordinator=None, lease_expires_at=None)
    )


def set_note(conn: Connection, job_id: int, text: str) -> None:
    """What `feedctl jobs` says the running job meets (`Job.note`); "" once it is over."""
    conn.execute(update(jobs).where(jobs.c.job_id == job_id).values(running_status=text, modified_at=time.time()))


def set_definition(
    conn: Connection, job_id: int, epoch: int, definition: Definition, definition_hash: str | None = None
) -> None:
    """What the job records of itself, changed by its coordinator (a table's key changed, the project changed
    in place): fenced by the lease's epoch."""
    values = {"definition": stored(definition), "modified_at": time.time()}
    if definition_hash is not None:
        values["definition_hash"] = definition_hash
    done = conn.execute(update(jobs).where(and_(jobs.c.job_id == job_id, jobs.c.lease_epoch == epoch)).values(**values))
    if done.rowcount != 1:
        raise LeaseLost(f"job {job_id}: another node took the lease")


def watched_rows(conn: Connection, job_ids: list[int], holder: str):
    """The statement of jobs' rows as a node watches them for changes: each job's status, definition, lease,
    whether `holder` holds it and whether another's has expired (decided by the store at the look's instant,
    the parameter `now`). A job's marks and status line are left out: they change at every
    checkpoint, and only the coordinator that wrote them moves them."""
    # A lease of this node's past its time is still its own until another node takes it (a new epoch): its
    # renewal, late under load, would otherwise wake every job whose lease it renews.
    here = jobs.c.coordinator == holder
    expires = jobs.c.lease_expires_at
    return (
        select(
            jobs.c.job_id,
            jobs.c.feed,
            jobs.c.status,
            jobs.c.definition_hash,
            jobs.c.coordinator,
            jobs.c.lease_epoch,
            jobs.c.initial_scan_done,
            case((here, 1), else_=0).label("here"),
            case((here, 0), (or_(expires.is_(None), expires < bindparam("now", type_=Float)), 1), else_=0).label(
                "expired"
            ),
        )
        .where(among(conn, jobs.c.job_id, job_ids))
        .order_by(jobs.c.job_id)
    )
