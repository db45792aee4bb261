"""This process as a node of the state store: registered while it runs, heartbeating, deregistered on a
clean exit, so that other nodes take over its jobs at once when it is gone, and not before."""

from __future__ import annotations

import os
import socket
import threading

from feedctl.state import nodes
from feedctl.state.store import StateStore


class Membership:
    """Registers on enter and deregisters on exit; heartbeats every third of the liveness TTL. `gone` is set
    when the registration was taken over (this process was stopped past the TTL and another took its id).
    Without a node id, the host's name, or `<host>-<pid>` while a live process uses it (a one-off `run`
    beside a `--follow` node of the same host); a node id given is this process's alone, or an error."""

    def __init__(self, store: StateStore, node_id: str | None, locality: str = "",
                 ttl: float = nodes.LIVENESS_TTL):
        self.store, self.node_id, self.locality, self.ttl = store, node_id, locality, ttl
        self.node: nodes.Node | None = None
        self.gone = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="node-heartbeat", daemon=True)

    def __enter__(self) -> "Membership":
        host = socket.gethostname()
        with self.store.transaction() as conn:
            try:
                self.node = nodes.register(conn, self.node_id or host, self.locality, ttl=self.ttl)
            except nodes.NodeError:
                if self.node_id:
                    raise
                self.node = nodes.register(conn, f"{host}-{os.getpid()}", self.locality, ttl=self.ttl)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        if not self.gone.is_set():
            with self.store.transaction() as conn:
                nodes.deregister(conn, self.node)

    def _beat(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            try:
                with self.store.transaction() as conn:
                    nodes.heartbeat(conn, self.node)
            except nodes.NodeGone:
                self.gone.set()
                return
            except Exception:  # the state store is busy or away for a moment: try again next beat
                continue
