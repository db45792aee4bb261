"""Partial compilation: a query compiled before is not rendered again until something it depends on
changes (the query, a macro, a var, --vars, its table's columns, feedctl's version), and one that reads an
environment variable is never kept, so no secret reaches target/."""

from __future__ import annotations

import pytest

from feedctl.compiler import partial
from feedctl.compiler.compile import compile_project
from feedctl.compiler.render import QueryRenderer
from feedctl.diagnostics import ProjectError
from support import write_delta
from support.e2e import file_sink, write_project

QUERY = "SELECT id, {{ doubled('amount') }} AS twice FROM {{ source('s', 'orders') }} WHERE amount > {{ var('min') }}\n"
MACRO = "{% macro doubled(c) %}{{ c }} * 2{% endmacro %}\n"


@pytest.fixture
def project(tmp_path):
    root = write_project(
        tmp_path / "p",
        {"orders": {"path": "warehouse/orders", "primary_key": ["id"]}},
        [{"name": "q", "query": "q.sql", "sink": "out"}, {"name": "secret", "query": "secret.sql", "sink": "out"}],
        [file_sink("out")],
        files={
            "feeds/q.sql": QUERY,
            "macros/m.sql": MACRO,
            "feeds/secret.sql": "SELECT id FROM {{ source('s', 'orders') }} "
            "WHERE region = '{{ env_var('FEEDCTL_T_REGION') }}'\n",
        },
        vars={"min": 5},
    )
    write_delta(
        root / "warehouse/orders",
        {"id": "int64", "amount": "int64", "region": "string"},
        [{"id": 1, "amount": 10, "region": "eu"}],
    )
    return root


@pytest.fixture
def renders(monkeypatch):
    """The query files rendered, by every compile of the test."""
    seen: list[str] = []
    original = QueryRenderer.render

    def render(self, query_file):
        seen.append(query_file)
        return original(self, query_file)

    monkeypatch.setattr(QueryRenderer, "render", render)
    monkeypatch.setenv("FEEDCTL_T_REGION", "eu-hush-1234")
    return seen


def _compile(root, renders, **kw) -> tuple[str, list[str]]:
    renders.clear()
    result = compile_project(root, keep=True, **kw)
    return result.feeds["q"].sql, sorted(renders)


def test_an_unchanged_query_is_not_rendered_again(project, renders):
    first, rendered = _compile(project, renders)
    assert first == "SELECT id, amount * 2 AS twice FROM s.orders WHERE amount > 5\n"
    assert rendered == ["feeds/q.sql", "feeds/secret.sql"]
    again, rendered = _compile(project, renders)
    assert again == first and rendered == ["feeds/secret.sql"]  # an env_var() query, every time
    assert b"eu-hush-1234" not in (project / partial.FILE).read_bytes()


@pytest.mark.parametrize(
    "change, expected",
    [
        ("query", "SELECT id, amount * 2 AS twice FROM s.orders WHERE amount > 5 AND id > 0\n"),
        ("macro", "SELECT id, amount * 3 AS twice FROM s.orders WHERE amount > 5\n"),
        ("project vars", "SELECT id, amount * 2 AS twice FROM s.orders WHERE amount > 7\n"),
        ("--vars", "SELECT id, amount * 2 AS twice FROM s.orders WHERE amount > 9\n"),
        ("feedctl version", "SELECT id, amount * 2 AS twice FROM s.orders WHERE amount > 5\n"),
    ],
)
def test_any_change_it_depends_on_compiles_it_again(project, renders, monkeypatch, change, expected):
    _compile(project, renders)
    kw = {}
    if change == "query":
        (project / "feeds/q.sql").write_text(QUERY.replace("\n", " AND id > 0\n"))
    elif change == "macro":
        (project / "macros/m.sql").write_text(MACRO.replace("* 2", "* 3"))
    elif change == "project vars":
        (project / "project.yml").write_text((project / "project.yml").read_text().replace("min: 5", "min: 7"))
    elif change == "--vars":
        kw["vars_override"] = {"min": 9}
    else:
        monkeypatch.setattr(partial, "__version__", "99.0.0")
    sql, rendered = _compile(project, renders, **kw)
    assert sql == expected and "feeds/q.sql" in rendered


def test_a_column_its_table_dropped_is_found_again(project, renders):
    _compile(project, renders)
    import shutil

    shutil.rmtree(project / "warehouse/orders")
    write_delta(project / "warehouse/orders", {"id": "int64", "region": "string"}, [{"id": 1, "region": "eu"}])
    with pytest.raises(ProjectError) as raised:
        compile_project(project, keep=True)
    assert [(d.code, d.file) for d in raised.value.diagnostics if d.is_error] == [("FC518", "feeds/q.sql")] * 2


def test_a_broken_macro_file_is_said_by_every_compile(project, renders):
    _compile(project, renders)
    (project / "macros/other.sql").write_text("{% macro unused() %}{{ oops {% endmacro %}\n")
    for _ in range(2):
        with pytest.raises(ProjectError) as raised:
            compile_project(project, keep=True)
        assert [(d.code, d.file) for d in raised.value.diagnostics if d.is_error] == [("FC406", "macros/other.sql")]
