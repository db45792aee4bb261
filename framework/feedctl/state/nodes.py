"""Nodes: the `feedctl run` processes sharing a state store. Each registers, heartbeats and deregisters;
one whose heartbeat is older than the liveness TTL is dead, and so, at once, is one whose process has ended
(killed, crashed): of this host, its pid no longer runs; on PostgreSQL, of any host, its session lock is gone
(`session_lock`). Its spans and jobs need not wait out the TTL. Functions take an open transaction."""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass

from sqlalchemy import and_, delete, insert, select, update
from sqlalchemy.engine import Connection

from feedctl.state import session_lock
from feedctl.state.many_rows import among, fetch_of
from feedctl.state.schema import node_views, nodes

LIVENESS_TTL = 6.0  # seconds without a heartbeat before a node is dead (a heartbeat every 2 s)


class NodeError(Exception):
    """A node cannot join: another live process already uses its id."""


class NodeGone(Exception):
    """This node's registration was taken over or removed: it must stop acting as the node."""


@dataclass(frozen=True)
class Node:
    node_id: str
    locality: str
    host: str
    pid: int
    started_at: float
    heartbeat_at: float
    feeds: tuple[str, ...] = ()  # the feeds whose spans it works (a --follow node)
    ended: bool = False  # its process is known to have ended: its pid no longer runs, or its session lock is gone

    @property
    def holder(self) -> str:
        """How the node names itself as a lease holder."""
        return f"{self.node_id}/{self.pid}"

    def live(self, now: float, ttl: float = LIVENESS_TTL) -> bool:
        return not self.ended and now - self.heartbeat_at <= ttl

    def last_live(self, ttl: float = LIVENESS_TTL) -> float:
        """Until when it counted as live."""
        return self.heartbeat_at if self.ended else self.heartbeat_at + ttl


def node_of(holder: str | None) -> str | None:
    """The node id of a lease holder (`<node id>/<pid>`)."""
    return holder.rsplit("/", 1)[0] if holder else None


def _node(row, locks: tuple[str, set[int]] | None) -> Node:
    """`locks`: the server's start and the session locks held (PostgreSQL)."""
    m = row._mapping
    # A pid reused by another process reads as running: the TTL then decides, as for a stopped process.
    ended = m["host"] == socket.gethostname() and not process_alive(m["pid"])
    if locks is not None and m["lock_session"] == locks[0]:  # its lock was taken since the server started
        ended = ended or session_lock.key(m["node_id"], m["host"], m["pid"]) not in locks[1]
    return Node(
        m["node_id"],
        m["locality"],
        m["host"],
        m["pid"],
        m["started_at"],
        m["heartbeat_at"],
        tuple(json.loads(m["feeds"] or "[]")),
        ended,
    )


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def process_node_id() -> str:
    """This process as a node of its own, where its host's name is taken by another live process."""
    return f"{socket.gethostname()}-{os.getpid()}"


def register(
    conn: Connection,
    node_id: str,
    locality: str,
    host: str | None = None,
    pid: int | None = None,
    ttl: float = LIVENESS_TTL,
    feeds: tuple[str, ...] = (),
) -> Node:
    """Join as `node_id`; refused while another live process holds that id. A process of this host that
    is gone (killed, say) is replaced at once, so a node restarted after a crash rejoins without waiting."""
    host, pid, now = host or socket.gethostname(), pid or os.getpid(), time.time()
    row = conn.execute(select(nodes).where(nodes.c.node_id == node_id)).first()
    if row is not None:
        found = _node(row, session_lock.held(conn))
        if found.live(now, ttl) and (found.host, found.pid) != (host, pid):
            raise NodeError(
                f"node {node_id} is already running (pid {found.pid} on {found.host or 'a host'}, "
                f"heartbeat {now - found.heartbeat_at:.1f} s ago); give this process another "
                "--node-id"
            )
        conn.execute(delete(nodes).where(nodes.c.node_id == node_id))
    conn.execute(
        insert(nodes).values(
            node_id=node_id,
            locality=locality,
            host=host,
            pid=pid,
            started_at=now,
            heartbeat_at=now,
            feeds=json.dumps(sorted(feeds)),
        )
    )
    return Node(node_id, locality, host, pid, now, now, tuple(sorted(feeds)))


def heartbeat(conn: Connection, node: Node, lock_session: str | None = None) -> None:
    """`lock_session`: the server start the node's session lock is held under now (None: not held)."""
    done = conn.execute(
        update(nodes)
        .where(and_(nodes.c.node_id == node.node_id, nodes.c.pid == node.pid, nodes.c.host == node.host))
        .values(heartbeat_at=time.time(), lock_session=lock_session)
    )
    if done.rowcount != 1:
        raise NodeGone(f"node {node.node_id} (pid {node.pid}) is no longer registered")


def stop_working(conn: Connection, node: Node, feed: str) -> None:
    """The node no longer works `feed`'s spans (it cannot run the feed's job with its copy of the project):
    coordinators place them elsewhere. A node whose job stopped (canceled, paused) still works the feed: it
    takes the next job, or the job resumed, at once."""
    _set_working(conn, node, feed, False)


def start_working(conn: Connection, node: Node, feed: str) -> None:
    """The node works `feed`'s spans again (a job of the feed it can run)."""
    _set_working(conn, node, feed, True)


def _set_working(conn: Connection, node: Node, feed: str, working: bool) -> None:
    mine = and_(nodes.c.node_id == node.node_id, nodes.c.pid == node.pid)
    row = conn.execute(select(nodes.c.feeds).where(mine)).first()
    if row is not None:
        feeds = {f for f in json.loads(row.feeds or "[]") if f != feed} | ({feed} if working else set())
        conn.execute(update(nodes).where(mine).values(feeds=json.dumps(sorted(feeds))))


@dataclass(frozen=True)
class View:
    """What a node's copy of the project says of a feed (`job/rollout.py`), and since when: the store's
    sequence number when the node loaded the copy that first said it (`state/sequence.py`)."""

    view: str
    since: int


def publish_view(conn: Connection, node_id: str, feed: str, view: str, loaded: int) -> View:
    """This node's view of `feed`, from its copy of the project loaded at `loaded`; a view the node has
    published already keeps its `since` (the node restarted, or loaded the same again)."""
    found = view_of(conn, node_id, feed)
    if found is not None and found.view == view:
        return found
    if found is not None:
        conn.execute(delete(node_views).where(and_(node_views.c.node_id == node_id, node_views.c.feed == feed)))
    conn.execute(insert(node_views).values(node_id=node_id, feed=feed, view=view, since=loaded))
    return View(view, loaded)


def view_of(conn: Connection, node_id: str, feed: str) -> View | None:
    row = conn.execute(
        select(node_views).where(and_(node_views.c.node_id == node_id, node_views.c.feed == feed))
    ).first()
    return View(row.view, row.since) if row is not None else None


def deregister(conn: Connection, node: Node) -> None:
    conn.execute(
        delete(nodes).where(and_(nodes.c.node_id == node.node_id, nodes.c.pid == node.pid, nodes.c.host == node.host))
    )


_NODES = select(nodes).order_by(nodes.c.node_id)  # built once: every placement reads the nodes


def list_nodes(conn: Connection) -> list[Node]:
    locks = session_lock.held(conn)
    return [_node(r, locks) for r in conn.execute(_NODES)]


def working(conn: Connection, feed: str, ttl: float = LIVENESS_TTL) -> tuple[dict[str, str], dict[str, float]]:
    """The live nodes that work `feed`'s spans (id → locality), and when each registered node that is not
    live last was."""
    now = time.time()
    members = list_nodes(conn)
    return (
        {n.node_id: n.locality for n in members if n.live(now, ttl) and feed in n.feeds},
        {n.node_id: n.last_live(ttl) for n in members if not n.live(now, ttl)},
    )


def views(conn: Connection, feed: str, ttl: float = LIVENESS_TTL) -> dict[str, View | None]:
    """The view of `feed` of each live node working it (None: it published none)."""
    now = time.time()
    published = {
        r.node_id: View(r.view, r.since) for r in conn.execute(select(node_views).where(node_views.c.feed == feed))
    }
    return {n.node_id: published.get(n.node_id) for n in list_nodes(conn) if n.live(now, ttl) and feed in n.feeds}


def published(conn: Connection, feeds: list[str]) -> dict[str, set[str]]:
    """The ids of the nodes whose runner of each of `feeds` published its view of it, in one statement."""
    found: dict[str, set[str]] = {}
    for row in fetch_of(conn, select(node_views.c.feed, node_views.c.node_id), node_views.c.feed, feeds):
        found.setdefault(row.feed, set()).add(row.node_id)
    return found


def live_holders(conn: Connection, ttl: float = LIVENESS_TTL) -> set[str]:
    """Lease holder names (`<node id>/<pid>`) of the live nodes."""
    now = time.time()
    return {n.holder for n in list_nodes(conn) if n.live(now, ttl)}


def views_of(conn: Connection, feeds: list[str]):
    """The statement of the nodes' views of the feeds, in order."""
    c = node_views.c
    return select(c.feed, c.node_id, c.view, c.since).where(among(conn, c.feed, feeds)).order_by(c.feed, c.node_id)
