"""`feedctl tail FEED`: a sinkless changefeed. Messages go to the terminal from now on (or after a
cursor), with no job in the project's state store: the run keeps its state and files in a temporary
folder and prints each batch's files in emission order as they appear."""

from __future__ import annotations

import copy
import tempfile
import threading
from dataclasses import replace
from threading import Event

from feedctl.compiler.compile import compile_project
from feedctl.diagnostics import UsageError, no_feed
from feedctl.encoding.compression import decompress
from feedctl.errors import RunError
from feedctl.node.runner import JobRunner
from feedctl.node.settings import RunSettings
from feedctl.project.model import Origin, SinkDef
from feedctl.sinks.cloudstorage import SinkFolder
from feedctl.sinks.messages import NAME
from feedctl.sinks.registry import kind_of
from feedctl.state.store import StateStore


def tail(
    project_dir,
    feed_name: str,
    write,
    cursor: str | None = None,
    stop: Event | None = None,
    seconds: float | None = None,
    poll_interval: float = 1.0,
) -> int:
    """Print the feed's messages with `write(topic, line)` until stopped or `seconds` pass; returns how many."""
    result = compile_project(project_dir, [feed_name])
    if feed_name not in result.feeds:
        raise UsageError(no_feed(feed_name, result.project.feeds))
    compiled = result.feeds[feed_name]
    stop = stop or Event()
    options = compiled.options.with_values(
        {"initial_scan": "no", "cursor": cursor, "end_time": None, "execution_locality": None}
    )
    with tempfile.TemporaryDirectory(prefix="feedctl-tail-") as tmp:
        uri = f"file://{tmp}/out"
        sink = SinkDef(
            name="tail",
            uri=uri,
            uri_display="(terminal)",
            kind=kind_of(uri).name,
            scheme="file",
            options={"partition_format": "flat"},
            options_display={},
            origin=Origin("", 0, 0),
        )
        project = copy.copy(result.project)
        project.sinks = {**project.sinks, "tail": sink}
        feed = replace(compiled.feed, sink="tail")
        runner_feed = replace(
            compiled,
            feed=feed,
            options=options,
            sink_display={"name": sink.name, "uri": sink.uri_display, "options": {}},
        )
        store = StateStore(f"sqlite:///{tmp}/state.db", tmp)
        printed: set[str] = set()
        out = SinkFolder(uri, tmp)
        count = 0

        def flush(*_args, **fields):
            nonlocal count
            if fields.get("event") not in ("batch", "resolved"):
                return
            for name in out.list():
                if name not in printed:
                    printed.add(name)
                    named = NAME.match(name)
                    topic = named["topic"] if named and named["topic"] else ""
                    for line in decompress(name, out.read(name)).decode().splitlines():
                        write(topic, line)
                        count += 1

        timer = threading.Timer(seconds, stop.set) if seconds is not None else None
        if timer:
            timer.daemon = True
            timer.start()
        try:
            JobRunner(
                project, runner_feed, store, RunSettings(follow=True, poll_interval=poll_interval), stop, flush
            ).run()
        except RunError as exc:
            raise UsageError(str(exc)) from None
        finally:
            if timer:
                timer.cancel()
        flush(event="batch")
        store.close()
        return count
