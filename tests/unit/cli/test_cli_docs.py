"""`feedctl docs generate` without Spark: one self-contained page of the project (its secrets stay hidden:
test_cli_secrets.py); `docs serve` before `generate` is a usage error. (The page in a browser:
tests/operations/test_docs.py.)"""

from __future__ import annotations

import json
import re

from feedctl.manual import manual_url
from support import Cli
from support.cli import assert_clean
from support.jobs import definition


def test_docs_generate_writes_one_page_of_the_project(init_project):
    result = Cli(init_project)("docs", "generate")
    assert result.exit_code == 0, result.output
    assert "1 table, 2 feeds, 2 sinks, 0 jobs" in result.output
    page = (init_project / "target/docs/index.html").read_text()
    for anchor in (
        "table-shop.orders",
        "feed-orders",
        "feed-large_orders",
        "sink-local_files",
        "sink-large_orders_files",
    ):
        assert f'id="{anchor}"' in page
    assert "decimal(10,2)" in page  # the table's columns and their types
    assert "FROM shop.orders" in page  # the compiled query
    assert '<a href="contracts/large_orders.json">' in page  # its contract, published beside the page
    contract = json.loads((init_project / "target/docs/contracts/large_orders.json").read_text())
    assert contract["tables"]["shop.orders"]["fields"]["amount"] == "decimal(10,2)"
    assert '<code>auto</code> <span class="muted">change data files where a version has them' in page
    assert page.count('class="edge"') == 4  # two feeds on one table, each into its sink
    assert not re.search(r"""src=["']https?://""", page)  # nothing fetched when viewed
    # Links out go to the manual only: each option shown to its entry in the reference.
    assert set(re.findall(r"""href=["'](https?://[^"'#]*)""", page)) == {
        manual_url() + "reference/feed-options/",
        manual_url() + "reference/sinks/",
    }


def test_docs_serve_before_generate_is_a_usage_error(init_project):
    result = Cli(init_project)("docs", "serve", "--port", "0")
    assert result.exit_code == 2 and "feedctl docs generate" in result.stderr
    assert_clean(result)


def test_metrics_port_needs_follow(init_project):
    result = Cli(init_project)("run", "--metrics-port", "9464")
    assert result.exit_code == 2 and "--follow" in result.stderr


def test_the_jobs_of_the_page_say_why_a_job_failed(init_project):
    from feedctl.state import jobs
    from feedctl.state.store import StateStore
    from feedctl.units import Hlc

    store = StateStore("sqlite:///target/state.db", init_project)
    with store.transaction() as conn:
        job = jobs.create_job(
            conn, "orders", "sha256:x", definition("shop.orders"), "file://x", Hlc(1), {"shop.orders": (0, 2)}
        )
        jobs.finish(conn, job.job_id, "failed", error="a data file is gone (vacuumed?)")
    store.close()
    assert Cli(init_project)("docs", "generate").exit_code == 0
    page = (init_project / "target/docs/index.html").read_text()
    table = page[page.index('id="job-table"') :]
    assert "<th>error</th>" in table and "a data file is gone (vacuumed?)" in table
