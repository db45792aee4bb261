"""Kafka sink (`kafka://host:port[,host:port]?params`), through confluent-kafka (librdkafka).

- One topic per table (`topic_prefix` + table name, or `full_table_name`), or every table to `topic_name`.
- The message key is the JSON array of the primary key; librdkafka's `fnv1a` partitioner hashes it, so a
  key always lands in one partition, and one producer per span sends a span's messages in order.
- The producer is idempotent with `acks=all` by default: a retried send neither duplicates nor reorders
  within a partition. With `RequiredAcks` ONE or NONE idempotence is off and one request at a time is in
  flight, so retries still keep a key's order.
- A batch counts as written only when every message is acknowledged: `finish()` waits for all and raises on
  any failed delivery, so the high-water mark never passes an unacknowledged message.
- Resolved timestamps `{"resolved": "..."}`, with a null key, go to every partition of every topic.
"""

from __future__ import annotations

import os
import time
from urllib.parse import urlsplit

from feedctl.diagnostics import first_line
from feedctl.errors import Unavailable
from feedctl.sinks.held_clients import Shared
from feedctl.sinks.sink import Sink, SinkKind, TaskTarget, VersionIn
from feedctl.sinks.stream import StreamWriter
from feedctl.sinks.uri_params import pem, truthy, uri_params
from feedctl.units import Hlc, parse_duration, plural

KIND = SinkKind(
    "kafka",
    {"kafka": "confluent_kafka"},
    frozenset({"topic_prefix", "topic_name", "kafka_sink_config", "extra_headers"}),
    version_in=VersionIn.TOPIC,
)

# How long librdkafka keeps retrying one message before reporting it failed (the batch then fails and is
# retried whole by the runner). Tests of a node process shorten it through the environment.
MESSAGE_TIMEOUT_MS = int(os.environ.get("FEEDCTL_TESTING_KAFKA_MESSAGE_TIMEOUT_MS") or 60_000)
# Unless `Flush` says otherwise, requests wait up to 20 ms to fill up to 4 MiB (librdkafka's defaults: 5 ms,
# 1 MB): fewer, larger requests cost a fifth less CPU per message, in the producer and in the broker alike.
BATCHING = {"linger.ms": 20, "batch.size": 4 << 20}


class KafkaSinkError(RuntimeError):
    pass


class KafkaUnavailable(KafkaSinkError, Unavailable):
    """Messages not delivered because the brokers cannot be reached now (or time out): retried as an outage."""


# librdkafka's codes of a broker away or slow, beside those it marks retriable itself: a message timed out
# waiting for one is the common case of a broker down for longer than `message.timeout.ms`.
_AWAY_CODES = ("_MSG_TIMED_OUT", "_TRANSPORT", "_ALL_BROKERS_DOWN", "_TIMED_OUT", "_TIMED_OUT_QUEUE", "_RESOLVE")


def client_config(uri: str) -> dict:
    """Bootstrap servers and the TLS/SASL settings the URI's parameters ask for."""
    parts = urlsplit(uri)
    params = uri_params(uri)
    config = {"bootstrap.servers": parts.netloc}
    tls = truthy(params.get("tls_enabled", "false"))
    sasl = truthy(params.get("sasl_enabled", "false"))
    config["security.protocol"] = {
        (False, False): "PLAINTEXT",
        (True, False): "SSL",
        (False, True): "SASL_PLAINTEXT",
        (True, True): "SASL_SSL",
    }[(tls, sasl)]
    if "ca_cert" in params:
        config["ssl.ca.pem"] = pem(params["ca_cert"])
    if "client_cert" in params:
        config["ssl.certificate.pem"] = pem(params["client_cert"])
    if "client_key" in params:
        config["ssl.key.pem"] = pem(params["client_key"])
    if truthy(params.get("insecure_tls_skip_verify", "false")):
        config["enable.ssl.certificate.verification"] = False
    if sasl:
        config["sasl.mechanisms"] = params.get("sasl_mechanism", "PLAIN")
        if "sasl_user" in params:
            config["sasl.username"] = params["sasl_user"]
        if "sasl_password" in params:
            config["sasl.password"] = params["sasl_password"]
    return config


def producer_config(uri: str, sink_options: dict) -> dict:
    """librdkafka producer settings from the URI and `kafka_sink_config`."""
    sink_config = sink_options.get("kafka_sink_config") or {}
    config = {
        **client_config(uri),
        "partitioner": "fnv1a",
        "message.timeout.ms": MESSAGE_TIMEOUT_MS,
        "delivery.report.only.error": True,
        "queue.buffering.max.messages": 1_000_000,
        **BATCHING,
    }
    acks = sink_config.get("RequiredAcks", "ALL")
    if acks == "ALL":
        config.update({"enable.idempotence": True, "acks": "all"})
    else:
        config.update(
            {
                "enable.idempotence": False,
                "acks": "1" if acks == "ONE" else "0",
                "max.in.flight.requests.per.connection": 1,
            }
        )
    flush = sink_config.get("Flush") or {}
    sizes = [n for n in (flush.get("Messages"), flush.get("MaxMessages")) if n]
    if sizes:
        config["batch.num.messages"] = min(sizes)
    if flush.get("Bytes"):
        config["batch.size"] = flush["Bytes"]
    if flush.get("Frequency") is not None:
        config["linger.ms"] = int(parse_duration(flush["Frequency"]) * 1000)
    if sink_config.get("Compression", "NONE") != "NONE":
        config["compression.type"] = sink_config["Compression"].lower()
        if "CompressionLevel" in sink_config:
            config["compression.level"] = sink_config["CompressionLevel"]
    if sink_config.get("ClientID"):
        config["client.id"] = sink_config["ClientID"]
    if sink_config.get("Version"):
        config["broker.version.fallback"] = sink_config["Version"]
    return config


def headers(sink_options: dict) -> list[tuple[str, bytes]] | None:
    extra = sink_options.get("extra_headers") or {}
    return [(k, v.encode()) for k, v in extra.items()] or None


def _quiet(config: dict) -> dict:
    """librdkafka's own log lines (a line per broker per attempt while a broker is away) only with --debug:
    feedctl says once that the sink is away, and when it is back."""
    debug = os.environ.get("FEEDCTL_LIBRARY_LOGS") == "debug"
    return config if debug or "log_level" in config else {**config, "log_level": 0}


def _make_producer(config: dict):
    from confluent_kafka import Producer as KafkaProducer

    return KafkaProducer(_quiet(config))


# One librdkafka producer per sink's settings in a process, shared by its tasks and resolved writes
# (`held_clients`): it is thread-safe, and keeps each partition's order. Closed, it flushes what it holds.
PRODUCERS = Shared(_make_producer, lambda producer: producer.flush(5.0))


class Producer:
    """A task's (or a resolved write's) messages through its process's shared producer: sends them and
    waits for their acknowledgements, telling its own failed deliveries from the other tasks'."""

    def __init__(self, config: dict, message_headers: list | None = None):
        self.errors: list[str] = []
        self._away = True  # every failed delivery so far says a broker is away
        # Only failed deliveries call back (delivery.report.only.error): no Python call per success.
        self._key, self.producer = PRODUCERS.get(config)
        self.headers = message_headers

    def _failed(self, error, message) -> None:
        if error is not None:
            self.errors.append(f"{message.topic()}[{message.partition()}]: {error.str()}")
            self._away = self._away and (error.retriable() or error.name() in _AWAY_CODES)

    def send(self, topic: str, keys: list[str | None], values: list[str], partition: int | None = None) -> None:
        produce, poll = self.producer.produce, self.producer.poll
        extra = {"on_delivery": self._failed}
        if partition is not None:
            extra["partition"] = partition
        if self.headers:
            extra["headers"] = self.headers
        for key, value in zip(keys, values):
            while True:
                try:
                    produce(topic, value, key, **extra)
                    break
                except BufferError:  # the local queue is full: let deliveries drain it
                    poll(0.05)
        poll(0)

    def finish(self, timeout: float = MESSAGE_TIMEOUT_MS / 1000 + 30) -> None:
        """Return once every message is acknowledged; raise if any was not: `KafkaUnavailable` when the
        brokers were away, else `KafkaSinkError`."""
        deadline = time.monotonic() + timeout
        while self.producer.flush(1.0) > 0:
            if time.monotonic() > deadline:
                raise KafkaUnavailable(f"{len(self.producer)} messages unacknowledged after {timeout:.0f} s")
        if self.errors:  # a producer that lost messages may be fenced or stale once the broker is back
            PRODUCERS.forget(self._key, self.producer)
            error = KafkaUnavailable if self._away else KafkaSinkError
            raise error(f"{len(self.errors)} messages not delivered; first: {self.errors[0]}")


def partitions(config: dict, topic: str, timeout: float = 30.0) -> list[int]:
    """The partitions of a topic (asking for them creates it where the broker creates topics on use)."""
    _, producer = PRODUCERS.get(config)
    deadline = time.monotonic() + timeout
    while True:
        try:
            meta = producer.list_topics(topic, timeout=max(1.0, deadline - time.monotonic())).topics.get(topic)
        except Exception as exc:  # KafkaException: the brokers did not answer in time
            raise KafkaUnavailable(f"topic {topic}: {exc}") from None
        if meta is not None and meta.error is None and meta.partitions:
            return sorted(meta.partitions)
        if time.monotonic() > deadline:
            raise KafkaSinkError(f"topic {topic}: no partitions ({meta.error if meta else 'not found'})")
        time.sleep(0.2)


def write_resolved(uri: str, sink_options: dict, topics: list[str], message: str) -> None:
    """The resolved message to every partition of every topic, acknowledged before this returns."""
    config = producer_config(uri, sink_options)
    writer = Producer(config, headers(sink_options))
    for topic in topics:
        for partition in partitions(config, topic):
            writer.send(topic, [None], [message], partition=partition)
    writer.finish()


def read_topics(uri: str, topics: list[str], idle: float = 3.0) -> dict[tuple[str, int], list]:
    """Every message of the topics, per (topic, partition) in offset order: (offset, key, value) bytes.
    Reads until nothing arrives for `idle` seconds (a broker's high watermark is not trusted)."""
    from confluent_kafka import Consumer, TopicPartition

    config = client_config(uri)
    consumer = Consumer(
        {**config, "group.id": "feedctl-verify", "enable.auto.commit": False, "auto.offset.reset": "earliest"}
    )
    try:
        assignment = [TopicPartition(t, p, 0) for t in topics for p in partitions(config, t)]
        consumer.assign(assignment)
        out: dict[tuple[str, int], list] = {(tp.topic, tp.partition): [] for tp in assignment}
        last = time.monotonic()
        while time.monotonic() - last < idle:
            batch = consumer.consume(10_000, timeout=0.5)
            for m in batch:
                if m.error():
                    raise KafkaSinkError(f"reading {m.topic()}[{m.partition()}]: {m.error().str()}")
                out[(m.topic(), m.partition())].append((m.offset(), m.key(), m.value()))
            if batch:
                last = time.monotonic()
        return out
    finally:
        consumer.close()


class KafkaTaskWriter(StreamWriter):
    """A task's messages, each keyed by its primary key: one producer, so a key's messages go out in order."""

    def __init__(self, target: TaskTarget):
        super().__init__(target)
        self.producer = Producer(target.settings["producer"], target.settings["headers"])

    def send(self, messages, values) -> None:
        from feedctl.encoding.json import key_json

        keys = messages.select(key_json(messages)).to_series().to_list()
        self.producer.send(self.target.topic, keys, values.to_list())

    def acknowledged(self) -> None:
        self.producer.finish()  # raises unless every message is acknowledged


class KafkaSink(Sink):
    KIND = KIND
    Writer = KafkaTaskWriter

    def task_settings(self) -> dict:
        return {"producer": producer_config(self.uri, self.options), "headers": headers(self.options)}

    def write_resolved(self, resolved: Hlc, fmt: str, envelope: str, topics: list[str]) -> str:
        from feedctl.encoding.json import resolved_message

        write_resolved(self.uri, self.options, sorted(set(topics)), resolved_message(str(resolved), envelope))
        return plural(len(set(topics)), "topic")

    def unreachable(self, timeout: float) -> str:
        """The brokers asked for the cluster's metadata, with the sink's own settings (TLS, SASL), by a producer
        of their own: one the node's producers never share."""
        producer = _make_producer(producer_config(self.uri, self.options))
        try:
            brokers = producer.list_topics(timeout=timeout).brokers
        except Exception as exc:  # KafkaException: no broker answered in time, or the handshake failed
            return f"no broker answered in {timeout:g}s ({first_line(exc)})"
        finally:
            producer.flush(0)
        return "" if brokers else f"no broker answered in {timeout:g}s"

    def read(self, job_id: int, topics: list[str], spec, problem, capture: str | None = None):
        """A stream per partition of the feed's topics, each in offset order."""
        from feedctl.sinks.messages import read_partitions

        yield from read_partitions(read_topics(self.uri, sorted(set(topics))), spec, problem)
