"""The task side shared by sinks without files (Kafka, webhooks, null): every message of the task sent in
order, the task's results summed per span once the sink has acknowledged them all."""

from __future__ import annotations

from feedctl import frame
from feedctl.sinks.sink import SinkWriter, TaskTarget


class StreamWriter(SinkWriter):
    def __init__(self, target: TaskTarget):
        from feedctl.encoding.json import JsonEncoder

        super().__init__(target)
        self.encoder = JsonEncoder(target.envelope, target.topic)
        self.spans: list = []

    def send(self, messages, values) -> None:
        """Hand the encoded `values` of `messages` to the sink (acknowledged by `acknowledged()`)."""

    def acknowledged(self) -> None:
        """Return once every message sent is acknowledged; raise if one was not."""

    def add(self, messages) -> None:
        import polars as pl

        if messages.height == 0:
            return
        values = self.encoder.values(messages)
        self.send(messages, values)
        self.bytes_out += values.str.len_bytes().sum()
        self.spans.append(
            messages.select(frame.SPAN, frame.TS_WALL, frame.TS_LOGICAL, values.str.len_bytes().alias("bytes"))
            .group_by(frame.SPAN, maintain_order=True)
            .agg(
                pl.len().alias("messages"),
                pl.col("bytes").sum(),
                pl.col(frame.TS_WALL).first().alias("min_wall"),
                pl.col(frame.TS_LOGICAL).first().alias("min_logical"),
                pl.col(frame.TS_WALL).last().alias("max_wall"),
                pl.col(frame.TS_LOGICAL).last().alias("max_logical"),
            )
        )

    def finish(self) -> list[dict]:
        import polars as pl

        self.acknowledged()
        if not self.spans:
            return []
        # A span cut across Arrow batches: its rows are in timestamp order, so first of the first, last of the last.
        spans = (
            pl.concat(self.spans)
            .group_by(frame.SPAN, maintain_order=True)
            .agg(
                pl.col("messages").sum(),
                pl.col("bytes").sum(),
                pl.col("min_wall").first(),
                pl.col("min_logical").first(),
                pl.col("max_wall").last(),
                pl.col("max_logical").last(),
            )
        )
        return [
            {
                "table": self.target.table,
                "span": r[frame.SPAN],
                "file": "",
                "emitted": r["bytes"],  # a message is sent as it is encoded
                **{k: r[k] for k in ("messages", "bytes", "min_wall", "min_logical", "max_wall", "max_logical")},
            }
            for r in spans.to_dicts()
        ]
