"""The clients a process holds for its sinks (the node, or an executor's Python worker), kept across batches,
tasks and resolved writes rather than made for each: a Kafka producer holds connections to every broker, an
object store's filesystem its sessions, a webhook's connection its TLS handshake. Made anew for each, a sink
away made thousands while it stayed away. Dropped when the node drains (`registry.close_clients`).

- `Shared`: one client per settings, used by every thread at once (a Kafka producer, an fsspec filesystem).
- `Pooled`: clients used by one writer at a time (an HTTP connection), each given back when its writer is
  done, so that batches one after another use the same one.

The settings key each client by their JSON text: it may hold a secret, and stays in this process's memory."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

Client = TypeVar("Client")


def settings_key(settings) -> str:
    return json.dumps(settings, sort_keys=True, default=str)


class Shared(Generic[Client]):
    def __init__(self, make: Callable[[dict], Client], close: Callable[[Client], None]):
        self._make, self._close = make, close
        self._held: dict[str, Client] = {}
        self._lock = threading.Lock()
        self.made = 0  # clients made by this process

    def get(self, settings: dict) -> tuple[str, Client]:
        """The client of these settings, made on first need; with its key, to `forget` it by."""
        key = settings_key(settings)
        with self._lock:
            client = self._held.get(key)
            if client is None:
                client = self._held[key] = self._make(settings)
                self.made += 1
            return key, client

    def forget(self, key: str, client: Client) -> None:
        """A client found broken: the next `get` makes a new one."""
        with self._lock:
            if self._held.get(key) is client:
                del self._held[key]

    def held(self) -> int:
        return len(self._held)

    def close_all(self) -> None:
        with self._lock:
            held = list(self._held.values())
            self._held.clear()
        for client in held:
            self._close(client)


class Pooled(Generic[Client]):
    def __init__(self, close: Callable[[Client], None]):
        self._close = close
        self._idle: dict[str, list[Client]] = {}
        self._lock = threading.Lock()
        self.made = 0

    def take(self, key: str, make: Callable[[], Client]) -> tuple[Client, bool]:
        """An idle client of `key`, or a new one; and whether it was idle (the other side may have closed it
        meanwhile)."""
        with self._lock:
            idle = self._idle.get(key)
            if idle:
                return idle.pop(), True
            self.made += 1
        return make(), False

    def give_back(self, key: str, client: Client) -> None:
        with self._lock:
            self._idle.setdefault(key, []).append(client)

    def held(self) -> int:
        return sum(len(idle) for idle in self._idle.values())

    def close_all(self) -> None:
        with self._lock:
            idle = [c for clients in self._idle.values() for c in clients]
            self._idle.clear()
        for client in idle:
            self._close(client)
