"""`feedctl docs generate` and `feedctl docs serve` over the demo project, looked at in a real headless Chromium
(Debian's, driven by Playwright): the page loads with no console error and fetches nothing but itself, shows
every table, feed and sink, the lineage graph and the job a run created. A screenshot is kept in
target/docs/screenshot.png for people to look at."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

from feedctl.testing.devservers import free_port
from support.browser import launch, wait_serving

FEEDCTL = str(Path(sys.executable).parent / "feedctl")


def _feedctl(root: Path, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [FEEDCTL, "--project-dir", str(root), *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def test_the_docs_site_of_the_demo_in_chromium(demo_project):
    root = demo_project
    _feedctl(root, "workload", "init", "movr", "--rows", "20")  # the tables, so their columns are shown
    _feedctl(root, "run", "-s", "movr_all")  # a job, so the jobs section has one
    generated = _feedctl(root, "--log-format", "json", "docs", "generate")
    event = json.loads(generated.stdout.strip().splitlines()[-1])
    assert event["event"] == "docs_generated" and event["jobs"] == 1, event
    manifest = json.loads((root / "target/manifest.json").read_text())
    tables, feeds, sinks = manifest["sources"], manifest["feeds"], manifest["sinks"]

    port = free_port()
    server = subprocess.Popen(
        [FEEDCTL, "--project-dir", str(root), "docs", "serve", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        wait_serving(url)
        errors, fetched = [], []
        with sync_playwright() as playwright:
            browser = launch(playwright)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
                page.on("pageerror", lambda e: errors.append(str(e)))
                page.on("request", lambda r: fetched.append(r.url))
                response = page.goto(url, wait_until="load")
                assert response is not None and response.ok
                assert page.title() == f"{manifest['metadata']['project_name']} · feedctl docs"

                for kind, names in (("table", tables), ("feed", feeds), ("sink", sinks)):
                    for name in names:
                        section = page.locator(f'[id="{kind}-{name}"]')
                        assert section.is_visible(), (kind, name)
                        assert section.locator("h3").inner_text().startswith(name)
                lineage = page.locator("svg#lineage")
                assert lineage.is_visible()
                assert lineage.locator("g.node").count() == len(tables) + len(feeds) + len(sinks)
                edges = sum(len(f["tables"]) + (f["sink"] is not None) for f in feeds.values())
                assert lineage.locator("path.edge").count() == edges
                # Columns with their Delta types, the compiled SQL of a query feed, a redacted-or-plain URI.
                users = page.locator('[id="table-movr.users"]')
                assert "city" in users.inner_text() and "string" in users.inner_text()
                queried = [n for n, f in feeds.items() if f["query"]]
                assert queried
                for name in queried:
                    assert page.locator(f'[id="feed-{name}"] summary', has_text="Compiled SQL").is_visible()
                    compiled = (root / "target/compiled" / f"{name}.sql").read_text().strip()
                    assert page.locator(f'[id="feed-{name}"] pre').inner_text().strip() == compiled
                for name, sink in sinks.items():
                    assert sink["uri"] in page.locator(f'[id="sink-{name}"]').inner_text()
                job_rows = page.locator("#job-table tr")
                assert job_rows.count() == 2 and "movr_all" in job_rows.nth(1).inner_text()

                page.fill("#filter", "rides")  # the filter hides what does not match
                assert page.locator('[id="table-movr.rides"]').is_visible()
                assert not page.locator('[id="table-movr.users"]').is_visible()
                page.fill("#filter", "")
                page.screenshot(path=str(root / "target/docs/screenshot.png"), full_page=True)
            finally:
                browser.close()
        assert errors == []
        assert set(fetched) == {url}  # self-contained: no script, style or font from anywhere else
        assert (root / "target/docs/screenshot.png").stat().st_size > 10_000
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(30)
    assert "Serving the docs at" in server.stdout.read()
