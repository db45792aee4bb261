"""A template in a pull request is compiled in CI: it reaches no Python internals, no environment variable but
through env_var(), no file but the project's macros, and its work is bounded. Each refusal is a diagnostic at
the template, and the compile ends in time."""

from __future__ import annotations

import os

import pytest

from feedctl.project.templates import Limits, Sandbox, TemplateRefused
from support import Cli, write_files

PROJECT = """\
name: shop
config-version: 1
sources:
  - name: shop
    tables:
      - {name: orders, path: target/warehouse/shop/orders, primary_key: [id]}
"""
SINKS = "sinks:\n  - name: files\n    uri: file://target/sink/files\n"
QUERY_FEED = "feeds:\n  - {name: q, query: q.sql, sink: files}\n"
PLAIN_FEED = 'feeds:\n  - name: orders\n    tables: [shop.orders]\n    sink: files\n    description: "%s"\n'

ESCAPES = [
    '{{ cycler.__init__.__globals__.os.popen("id").read() }}',
    "{{ self.__init__.__globals__.__builtins__.open('/etc/passwd').read() }}",
    "{{ lipsum.__globals__['os'].environ }}",
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ namespace.__init__.__globals__ }}",
]


def written(root) -> str:
    return "\n".join(p.read_text(errors="replace") for p in (root / "target").rglob("*") if p.is_file())


def compiled(root):
    result = Cli(root)("compile")
    return result, result.stdout + result.stderr


@pytest.mark.parametrize("escape", ESCAPES)
def test_a_query_cannot_reach_python_internals(tmp_path, escape):
    root = write_files(
        tmp_path / "p",
        {
            "project.yml": PROJECT,
            "sinks/s.yml": SINKS,
            "feeds/f.yml": QUERY_FEED,
            "feeds/q.sql": f"SELECT id FROM {{{{ source('shop', 'orders') }}}} -- {escape}\n",
        },
    )
    result, output = compiled(root)
    assert result.exit_code == 1, output
    assert "FC407" in output and "feeds/q.sql:1" in output, output
    assert "uid=" not in output + written(root), "no command run"
    assert "root:" not in output + written(root), "no file read"


@pytest.mark.parametrize("escape", ESCAPES[:3])
def test_a_yaml_value_and_a_macro_cannot_either(tmp_path, escape):
    root = write_files(
        tmp_path / "p",
        {"project.yml": PROJECT, "sinks/s.yml": SINKS, "feeds/f.yml": PLAIN_FEED % escape.replace('"', "'")},
    )
    result, output = compiled(root)
    assert result.exit_code == 1 and "FC407" in output and "feeds/f.yml:5" in output, output
    root = write_files(
        tmp_path / "m",
        {
            "project.yml": PROJECT,
            "sinks/s.yml": SINKS,
            "feeds/f.yml": PLAIN_FEED % "orders",
            "macros/m.sql": f"{{% set x = {escape[3:-3]} %}}\n{{% macro m() %}}1{{% endmacro %}}\n",
        },
    )
    result, output = compiled(root)
    assert result.exit_code == 1 and "FC40" in output and "macros/m.sql" in output, output
    assert "uid=" not in output + written(root)


def test_the_environment_is_reached_only_through_env_var(tmp_path, monkeypatch):
    monkeypatch.setenv("SHOP_PLANTED", "planted-7c1d")
    root = write_files(
        tmp_path / "p",
        {
            "project.yml": PROJECT,
            "sinks/s.yml": SINKS,
            "feeds/f.yml": QUERY_FEED,
            "feeds/q.sql": "SELECT id FROM {{ source('shop', 'orders') }} "
            "-- {{ lipsum.__globals__.os.environ.SHOP_PLANTED }}\n",
        },
    )
    result, output = compiled(root)
    assert result.exit_code == 1 and "planted-7c1d" not in output


@pytest.mark.parametrize("included", ["project.yml", "../secret.txt", "/etc/passwd", "feeds/f.yml"])
def test_a_template_includes_only_the_projects_macros(tmp_path, included):
    (tmp_path / "secret.txt").write_text("s3cr3t-contents")
    root = write_files(
        tmp_path / "p",
        {
            "project.yml": PROJECT,
            "sinks/s.yml": SINKS,
            "feeds/f.yml": QUERY_FEED,
            "macros/ok.sql": "{% macro cents(c) %}{{ c }} / 100{% endmacro %}\n",
            "feeds/q.sql": "SELECT {% import 'macros/ok.sql' as m %}{{ m.cents('id') }} "
            f"AS x FROM {{{{ source('shop', 'orders') }}}} "
            f"-- {{% include '{included}' %}}\n",
        },
    )
    result, output = compiled(root)
    assert result.exit_code == 1, output
    assert "may include or import only the project's macros" in output or "not found" in output.lower(), output
    assert "s3cr3t-contents" not in output and "config-version" not in output


def test_importing_a_macro_file_is_allowed(tmp_path):
    root = write_files(
        tmp_path / "p",
        {
            "project.yml": PROJECT,
            "sinks/s.yml": SINKS,
            "feeds/f.yml": QUERY_FEED,
            "macros/ok.sql": "{% macro cents(c) %}{{ c }} / 100{% endmacro %}\n",
            "feeds/q.sql": "{% import 'macros/ok.sql' as m %}SELECT {{ m.cents('id') }} "
            "AS x FROM {{ source('shop', 'orders') }}\n",
        },
    )
    result, output = compiled(root)
    assert result.exit_code == 0, output
    assert "id / 100 AS x" in (root / "target/compiled/q.sql").read_text()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_query_that_is_not_a_regular_file_is_refused_not_waited_on(tmp_path):
    root = write_files(tmp_path / "p", {"project.yml": PROJECT, "sinks/s.yml": SINKS, "feeds/f.yml": QUERY_FEED})
    os.mkfifo(root / "feeds/q.sql")
    result, output = compiled(root)
    assert result.exit_code == 1 and "FC204" in output and "not a regular file" in output, output


def test_a_query_outside_the_project_is_reported_at_its_query_key(tmp_path):
    (tmp_path / "x.sql").write_text("SELECT 1\n")
    root = write_files(
        tmp_path / "p",
        {
            "project.yml": PROJECT,
            "sinks/s.yml": SINKS,
            "feeds/f.yml": "feeds:\n  - {name: q, query: ../../x.sql, sink: files}\n",
        },
    )
    result, output = compiled(root)
    assert result.exit_code == 1 and "feeds/f.yml:2" in output and "outside the project" in output, output


@pytest.mark.parametrize(
    "expression",
    [
        "'x' * 10**9",
        "['x'] * 10**9",
        "2 ** 100000000",
        "'%1000000000d' % 1",
        "'{:>1000000000}'.format(1)",
        "'x' | center(10**9)",
        "'x'.ljust(10**9)",
        "'x' | indent(10**9)",
        "('x' * 1000000) | replace('', 'yyyyyyyyyyy')",
        "range(10**9) | list",
    ],
)
def test_work_a_template_asks_for_is_bounded(expression):
    sandbox = Sandbox()
    with pytest.raises(TemplateRefused):
        sandbox.render(sandbox.from_string("{{ %s }}" % expression))


def test_a_render_that_runs_too_long_is_stopped():
    sandbox = Sandbox(Limits(seconds=0.3))
    loops = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    with pytest.raises(TemplateRefused, match="more than 0.3 s"):
        sandbox.render(sandbox.from_string(loops))


def test_bounded_is_not_crippled():
    sandbox = Sandbox()
    text = (
        "{{ 'ab' * 3 }} {{ 2 ** 10 }} {{ '%5d' % 42 }} {{ 'x' | center(5) }} {{ range(3) | list }} "
        "{{ 100000000 | default(1) }} {{ 'a-b' | replace('-', '_') }}"
    )
    assert sandbox.render(sandbox.from_string(text)) == "ababab 1024    42   x   [0, 1, 2] 100000000 a_b"
