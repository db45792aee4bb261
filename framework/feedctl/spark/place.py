"""Where a project's Spark runs, as `project.yml` says: a classic master (`local[*]`, `spark://host:port`), or
a Spark Connect server, remote (`remote: sc://host:port/;token=...`) or started by feedctl itself for a local
master in Spark 4's connect mode (`conf: {spark.api.mode: connect}`). Decided here without starting Spark,
for the compiler, `debug` and the session alike."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from feedctl.project.env_vars import REDACTED

DEFAULT_MASTER = "local[*]"
LOOPBACK = ("localhost", "127.0.0.1", "::1")

# Settings a remote session applies (`spark.conf.set`): Spark SQL's runtime settings and Hadoop's. Spark SQL's
# static settings below, and every other key (the driver's and executors' memory and options, the master, the
# UI, the Python workers), belong to the server's start, which feedctl does not make.
_SESSION_PREFIXES = ("spark.sql.", "spark.hadoop.")
_STATIC_SQL = (
    "spark.sql.extensions",
    "spark.sql.warehouse.dir",
    "spark.sql.catalogImplementation",
    "spark.sql.globalTempDatabase",
    "spark.sql.queryExecutionListeners",
    "spark.sql.streaming.streamingQueryListeners",
    "spark.sql.cache.serializer",
    "spark.sql.ui.",
    "spark.sql.hive.metastore.",
    "spark.sql.event.truncate.length",
    "spark.sql.debug",
    "spark.sql.codegen.cache.maxEntries",
    "spark.sql.legacy.sessionInitWithConfigDefaults",
)
# feedctl's own keys, read by the client: never sent.
CLIENT_KEYS = ("spark.api.mode",)


@dataclass(frozen=True)
class SparkPlace:
    master: str = DEFAULT_MASTER
    conf: dict[str, str] = field(default_factory=dict)
    remote: str = ""  # sc://host:port/;params, as the project gives it (its token in the clear)

    @property
    def connect(self) -> bool:
        """Whether the process talks to Spark through Spark Connect (no SparkContext, no RDD)."""
        return bool(self.remote) or self.conf.get("spark.api.mode", "").lower() == "connect"

    @property
    def shares_disk(self) -> bool:
        """Whether the executors run on this host and see its disk: a local master, or a remote on loopback (a
        server on this machine, as the tests start; its executors are its children unless its own master
        says otherwise, which the client cannot see)."""
        if self.remote:
            return remote_host(self.remote) in LOOPBACK
        return self.master.startswith("local")

    @property
    def checks_executors(self) -> bool:
        """Whether the executors' Python is someone else's to provide: a cluster's or a remote server's."""
        return bool(self.remote) or not self.master.startswith("local")

    def described(self) -> str:
        """For messages: the remote without its parameters (the token), else the master."""
        return redact_remote(self.remote) if self.remote else self.master

    def classic_conf(self) -> dict[str, str]:
        """Of `conf`, what a classic session (or the server feedctl starts in its JVM) is started with."""
        return {k: v for k, v in self.conf.items() if k not in CLIENT_KEYS}

    def session_conf(self) -> dict[str, str]:
        """Of `conf`, what a remote session takes."""
        return {k: v for k, v in self.conf.items() if remote_applies(k)}

    def ignored_by_remote(self) -> list[str]:
        """Of `conf`, the keys a remote session does not take (they are the server's to set)."""
        if not self.remote:
            return []
        return [k for k in self.conf if not remote_applies(k) and k not in CLIENT_KEYS]


def remote_applies(key: str) -> bool:
    return key.startswith(_SESSION_PREFIXES) and not key.startswith(_STATIC_SQL)


def remote_host(remote: str) -> str:
    try:
        return (urlsplit(remote.split(";", 1)[0]).hostname or "").lower()
    except ValueError:
        return ""


def remote_address(remote: str) -> tuple[str, int]:
    """(host, port) of an `sc://` URL; Spark Connect's port 15002 when it names none."""
    parts = urlsplit(remote.split(";", 1)[0])
    return parts.hostname or "", parts.port or 15002


_PARAM = re.compile(r";([^;=/]+)=([^;]*)")


def redact_remote(remote: str) -> str:
    """`sc://host:port/;token=...;user_id=x` with every parameter but the harmless ones redacted: Spark
    Connect's parameters are `;name=value` after the path, which no URI parser reads as a query."""
    harmless = ("use_ssl", "user_id", "session_id", "user_agent", "grpc_max_message_size")
    return _PARAM.sub(lambda m: f";{m[1]}={m[2] if m[1] in harmless else REDACTED}", remote)
