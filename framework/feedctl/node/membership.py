"""This process as a node of the state store: registered while it runs, heartbeating, deregistered on a
clean exit, so that other nodes take over its jobs at once when it is gone, and not before. On PostgreSQL it
holds its session lock meanwhile, so that its death is seen at once from every host."""

from __future__ import annotations

import socket

from feedctl.coordinator.lease import Renewal
from feedctl.state import nodes, spans
from feedctl.state.session_lock import SessionLock
from feedctl.state.store import StateStore


class Membership(Renewal):
    """Registers on enter and deregisters on exit; heartbeats every third of the liveness TTL. `lost` is set
    when the registration was taken over (this process was stopped past the TTL and another took its id).
    Without a node id, the host's name, or `<host>-<pid>` while a live process uses it (a one-off `run`
    beside a `--follow` node of the same host); a node id given is this process's alone, or an error."""

    lost_on = nodes.NodeGone

    def __init__(
        self,
        store: StateStore,
        node_id: str | None,
        locality: str = "",
        ttl: float = nodes.LIVENESS_TTL,
        feeds: tuple[str, ...] = (),
    ):
        super().__init__(store, ttl, "node-heartbeat")
        self.node_id, self.locality, self.feeds = node_id, locality, feeds
        self.node: nodes.Node | None = None
        self.lock = SessionLock(store)

    def renew(self, conn) -> None:
        nodes.heartbeat(conn, self.node, self.lock.keep(self.node))

    def __enter__(self) -> "Membership":
        host = socket.gethostname()
        with self.store.transaction() as conn:
            try:
                self.node = nodes.register(conn, self.node_id or host, self.locality, ttl=self.ttl, feeds=self.feeds)
            except nodes.NodeError:
                if self.node_id:
                    raise
                self.node = nodes.register(conn, nodes.process_node_id(), self.locality, ttl=self.ttl, feeds=self.feeds)
        lock_session = self.lock.keep(self.node)
        if lock_session is not None:
            with self.store.transaction() as conn:
                nodes.heartbeat(conn, self.node, lock_session)
        return super().__enter__()

    def __exit__(self, *exc) -> None:
        super().__exit__(*exc)
        if not self.lost.is_set():  # its spans are placed elsewhere at the coordinators' next step
            with self.store.transaction() as conn:
                spans.boundary(conn, self.node.node_id, release=True)
                nodes.deregister(conn, self.node)
        self.lock.close()
