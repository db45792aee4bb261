"""The manual (`docs/`, `mkdocs.yml`) as `make docs` builds it: strict (no broken link or anchor, no page
outside the nav, no warning), its reference holding an entry for everything users can name, each listed here
from the code itself, not from the generator that writes the pages; and the built site in Debian's Chromium:
the home page, a guide, the options reference, and the search finding an option by its name. Screenshots
are kept in the build folder, `target/site/screenshots/`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from html import unescape
from pathlib import Path

import click
import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import sync_playwright

from feedctl.diagnostics import CODES
from feedctl.testing.devservers import free_port
from support.browser import launch, wait_serving

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "target" / "site"
MKDOCS = str(Path(sys.executable).parent / "mkdocs")
SCHEMAS = ROOT / "framework" / "feedctl" / "project" / "schemas"


@pytest.fixture(scope="module")
def built() -> Path:
    done = subprocess.run(
        [MKDOCS, "build", "--strict", "--site-dir", str(SITE)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},  # Material's notice of its successor
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    return SITE


def _ids(site: Path, page: str) -> set[str]:
    return set(re.findall(r'\bid="([^"]+)"', (site / page / "index.html").read_text(encoding="utf-8")))


def _text(site: Path, page: str) -> str:
    return unescape(re.sub(r"<[^>]+>", "", (site / page / "index.html").read_text(encoding="utf-8")))


def _commands() -> dict[str, click.Command]:
    """Every command users can run, by its anchor: `feedctl-` and its words joined by `-`."""
    from feedctl.cli import main

    found = {}

    def walk(group: click.Group, words: tuple[str, ...]) -> None:
        for name, command in group.commands.items():
            if isinstance(command, click.Group):
                walk(command, (*words, name))
            elif not command.hidden:
                found["-".join(("feedctl", *words, name))] = command

    walk(main, ())
    return found


def _properties(schema_file: str, definition: str) -> set[str]:
    schema = json.loads((SCHEMAS / schema_file).read_text())
    return set(schema["$defs"][definition]["properties"])


def test_every_command_and_flag_has_an_entry(built):
    from feedctl.cli import main

    commands = _commands()
    assert {"feedctl-run", "feedctl-compile", "feedctl-docs-generate", "feedctl-schemas-freeze"} <= set(commands)
    assert set(commands) - _ids(built, "reference/commands") == set()
    text = _text(built, "reference/commands")
    flags = {
        opt
        for command in [main, *commands.values()]
        for p in command.params
        if isinstance(p, click.Option) and not p.hidden
        for opt in p.opts
    }
    assert {"--follow", "--workers", "--warn-error", "--fail-on", "--port"} <= flags
    assert {f for f in flags if f not in text} - {"--version"} == set()


def test_every_feed_option_sink_option_and_scheme_has_an_entry(built):
    options = _properties("feeds.schema.json", "options")
    assert {"resolved", "envelope", "batch_rows"} <= options
    assert options - _ids(built, "reference/feed-options") == set()
    sink_options = {f"option-{o}" for o in _properties("sinks.schema.json", "options")}
    assert sink_options - _ids(built, "reference/sinks") == set()

    from feedctl.sinks.registry import SINKS

    schemes = {scheme for sink in SINKS.values() for scheme in sink.KIND.schemes}
    assert {"file", "s3", "gs", "azure", "kafka", "webhook-https", "null"} <= schemes
    assert schemes - _ids(built, "reference/sinks") == set()

    project = json.loads((SCHEMAS / "project.schema.json").read_text())["properties"]
    assert set(project) - _ids(built, "reference/project") == set()


def test_every_diagnostic_code_has_an_example_that_produces_it(built):
    page = (built / "reference/diagnostics/index.html").read_text(encoding="utf-8")
    ids = _ids(built, "reference/diagnostics")
    for code in CODES:
        assert code.lower() in ids, code
        # The section's printed output, got by running its example at the build, names the code.
        section = page.split(f'id="{code.lower()}"', 1)[1].split("<h3", 1)[0]
        assert code in unescape(re.sub(r"<[^>]+>", "", section.split("$ feedctl", 1)[-1])), code


def test_every_metric_and_every_field_users_read_has_an_entry(built):
    from prometheus_client import generate_latest

    from feedctl.commands.jobs import JOB_FIELDS
    from feedctl.metrics.changefeed import REGISTRY
    from feedctl.metrics.node_gauges import NodeGauges

    # The names a scrape gives: the counters' and histogram's exposition, and the gauges read at each scrape.
    # A counter's `_created` series (once it has a sample) is the time the client library created it, which the
    # page says once: not a metric of its own.
    exposed = re.findall(r"^# TYPE (\S+)", generate_latest(REGISTRY).decode(), re.M)
    served = {name for name in exposed if not name.endswith("_created")}
    served |= {f.name + ("_total" if f.type == "counter" else "") for f in NodeGauges(None, "", list).describe()}
    assert {"changefeed_emitted_messages_total", "changefeed_commit_latency", "changefeed_running"} <= served
    assert served - _ids(built, "reference/metrics") == set()

    assert set(JOB_FIELDS) - _ids(built, "reference/jobs-json") == set()
    manifest = json.loads((ROOT / "framework/feedctl/compiler/manifest.schema.json").read_text())
    assert set(manifest["properties"]) - _ids(built, "reference/manifest") == set()


def test_the_docs_page_of_a_project_links_each_option_to_its_entry_in_the_manual(built, demo_project, monkeypatch):
    from support import Cli

    monkeypatch.setenv("FEEDCTL_MANUAL_URL", "https://manual.example/feedctl")
    assert Cli(demo_project)("docs", "generate").exit_code == 0
    page = (demo_project / "target/docs/index.html").read_text(encoding="utf-8")
    links = re.findall(r'href="https://manual\.example/feedctl/([^"#]+)#([^"]+)"', page)
    pages = {p for p, _ in links}
    assert pages == {"reference/feed-options/", "reference/sinks/"}, pages
    for linked, anchor in set(links):
        assert anchor in _ids(built, linked.rstrip("/")), (linked, anchor)
    manifest = json.loads((demo_project / "target/manifest.json").read_text())
    shown = {o for feed in manifest["feeds"].values() for o in feed["options"]}
    assert shown <= {a for p, a in links if p == "reference/feed-options/"}


def test_the_manual_in_chromium_home_guide_reference_and_search(built):
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(built)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/"
    shots = built / "screenshots"
    shots.mkdir(exist_ok=True)
    try:
        wait_serving(url)
        errors = []
        with sync_playwright() as playwright:
            browser = launch(playwright)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.on("pageerror", lambda e: errors.append(str(e)))
                assert page.goto(url, wait_until="load").ok
                assert "feedctl" in page.title()
                assert page.locator("nav").get_by_text("Get started").first.is_visible()
                page.screenshot(path=str(shots / "home.png"))

                assert page.goto(url + "guides/sinks/kafka/", wait_until="load").ok
                assert page.locator("h1").first.inner_text().strip() != ""
                assert "kafka://" in page.locator("article").inner_text()
                page.screenshot(path=str(shots / "guide.png"))

                assert page.goto(url + "reference/feed-options/", wait_until="load").ok
                assert page.locator('[id="min_checkpoint_frequency"]').is_visible()
                page.screenshot(path=str(shots / "options.png"))

                # The search, by an option's name, leads to its entry. Its index loads in a worker: a query
                # typed before it is ready finds nothing, so it is typed again until the index answers.
                page.keyboard.press("/")
                query = page.locator("input[data-md-component=search-query]")
                result = page.locator(".md-search-result__link", has_text="min_checkpoint_frequency").first
                deadline = time.monotonic() + 90
                while True:
                    query.fill("")
                    query.press_sequentially("min_checkpoint_frequency")
                    try:
                        result.wait_for(timeout=3_000)
                        break
                    except PlaywrightTimeout:
                        assert time.monotonic() < deadline, "the search found no entry of min_checkpoint_frequency"
                page.screenshot(path=str(shots / "search.png"))
                result.click()
                page.wait_for_url(re.compile(r"min_checkpoint_frequency"))
            finally:
                browser.close()
        assert errors == []
        assert all((shots / f"{name}.png").stat().st_size > 10_000 for name in ("home", "guide", "options", "search"))
    finally:
        server.terminate()
        server.wait(30)
