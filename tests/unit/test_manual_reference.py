"""The manual's reference as the code generates it, without building the site (tests/operations/test_manual.py
builds it): every option has its line of how it relates to CockroachDB's, and every page is written."""

from __future__ import annotations

import json
from pathlib import Path

from feedctl.manual import cockroachdb, manual_url
from feedctl.manual.reference import pages

SCHEMAS = Path(__file__).resolve().parents[2] / "framework" / "feedctl" / "project" / "schemas"


def _options(schema_file: str) -> set[str]:
    return set(json.loads((SCHEMAS / schema_file).read_text())["$defs"]["options"]["properties"])


def test_every_option_says_how_it_relates_to_cockroachdb_s_and_no_line_is_left_over():
    assert set(cockroachdb.FEED_OPTIONS) == _options("feeds.schema.json")
    assert set(cockroachdb.SINK_OPTIONS) == _options("sinks.schema.json")


def test_every_reference_page_is_written_with_a_title():
    written = pages()
    assert set(written) == {
        f"reference/{name}.md"
        for name in ("commands", "project", "feed-options", "sinks", "diagnostics", "metrics", "manifest", "jobs-json")
    }
    for path, text in written.items():
        assert text.startswith("# "), path
    # What an option's entry says, from the defaults and the in-place rules.
    options = written["reference/feed-options.md"]
    entry = options.split("{#min_checkpoint_frequency}", 1)[1].split("\n### ", 1)[0]
    assert "**Default**: `30s`" in entry and "takes the new value from its next batch" in entry
    entry = options.split("{#format}", 1)[1].split("\n### ", 1)[0]
    assert "a new job (a sink's files or topics hold one format" in entry
    # Text from the code shows its `<tag>` as text: Markdown would take it for an HTML tag and drop it.
    assert "tag:&lt;tag&gt;" in written["reference/commands.md"]
    assert "`<source>.<table>`" in written["reference/feed-options.md"]  # within code, as it is


def test_the_manual_s_address_is_the_served_one_unless_told(monkeypatch):
    monkeypatch.delenv("FEEDCTL_MANUAL_URL", raising=False)
    assert manual_url() == "http://127.0.0.1:8000/"
    monkeypatch.setenv("FEEDCTL_MANUAL_URL", "https://docs.example/feedctl")
    assert manual_url() == "https://docs.example/feedctl/"
