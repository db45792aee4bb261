"""Secrets from env_var() never appear in target/ or in what feedctl prints, even inside error messages."""

from __future__ import annotations

from feedctl.project.secrets import redact_uri
from support import Cli, write_files

PROJECT = """\
name: shop
config-version: 1
sources:
  - name: shop
    tables:
      - {name: orders, path: target/warehouse/shop/orders, primary_key: [id]}
vars:
  api_token: "{{ env_var('SHOP_VAR_TOKEN') }}"
"""


def _files(sink_options: str) -> dict[str, str]:
    return {
        "project.yml": PROJECT,
        "sinks/s.yml": "sinks:\n  - name: files\n    uri: file://target/sink/files\n" + sink_options,
        "feeds/f.yml": "feeds:\n  - {name: orders, tables: [shop.orders], sink: files}\n",
    }


def _everything_written(root) -> str:
    return "\n".join(p.read_text(errors="replace") for p in (root / "target").rglob("*") if p.is_file())


def test_vars_from_env_var_are_redacted_in_the_manifest(tmp_path, monkeypatch):
    monkeypatch.setenv("SHOP_VAR_TOKEN", "tok-5f2a9c1e")
    root = write_files(tmp_path / "p", _files(""))
    result = Cli(root)("compile")
    assert result.exit_code == 0, result.output
    assert "tok-5f2a9c1e" not in _everything_written(root)
    assert "tok-5f2a9c1e" not in result.output


def test_a_malformed_secret_value_is_not_printed_in_its_error(tmp_path, monkeypatch):
    monkeypatch.setenv("SHOP_VAR_TOKEN", "tok-5f2a9c1e")
    monkeypatch.setenv("SHOP_FILE_SIZE", "hunter2-is-not-a-size")
    root = write_files(tmp_path / "p", _files("    options: {file_size: \"{{ env_var('SHOP_FILE_SIZE') }}\"}\n"))
    for json_logs in (False, True):
        result = Cli(root)("compile", json_logs=json_logs)
        assert result.exit_code == 1
        assert "FC108" in result.stderr
        assert "hunter2-is-not-a-size" not in result.stderr + result.stdout


def test_user_names_are_not_secrets_but_passwords_are():
    shown = redact_uri("kafka://broker:9092?sasl_user=cdc&sasl_password=pw123&topic_prefix=x&sas_token=t0k")
    assert "sasl_user=cdc" in shown and "topic_prefix=x" in shown
    assert "pw123" not in shown and "t0k" not in shown


PLANTED = {  # each longer than a diagnostic quotes (57 characters), so a shortened one would still show
    "SHOP_CONF": "conf-" + "c" * 60,
    "SHOP_PATH": "path-" + "p" * 60,
    "SHOP_OPTION": "option-" + "o" * 60,
    "SHOP_HOST": "host-" + "h" * 60,
    "SHOP_NESTED": "nested-" + "n" * 60,
    "SHOP_VAR": "var-" + "v" * 60,
    "SHOP_QUERY": "query-" + "q" * 60,
    "SHOP_MACRO": "macro-" + "m" * 60,
}

EVERYWHERE = {
    "project.yml": """\
name: shop
config-version: 1
spark:
  conf:
    spark.app.label: "{{ env_var('SHOP_CONF') }}"
sources:
  - name: shop
    storage_options: {region_name: "{{ env_var('SHOP_OPTION') }}"}
    tables:
      - {name: orders, path: "target/warehouse/{{ env_var('SHOP_PATH') }}", primary_key: [id]}
vars:
  label: "{{ env_var('SHOP_VAR') }}"
""",
    "sinks/s.yml": """\
sinks:
  - name: hook
    uri: "webhook-https://{{ env_var('SHOP_HOST') }}.example.com/in"
    options:
      extra_headers: {X-Team: "{{ env_var('SHOP_NESTED') }}"}
""",
    "feeds/f.yml": "feeds:\n  - {name: labelled, query: q.sql, sink: hook}\n",
    "feeds/q.sql": "SELECT id, '{{ var('label') }}' AS label, '{{ env_var('SHOP_QUERY') }}' AS q, '{{ m() }}' AS m\n"
    "FROM {{ source('shop', 'orders') }}\n",
    "macros/m.sql": "{% set taken = env_var('SHOP_MACRO') %}{% macro m() %}{{ taken }}{% endmacro %}\n",
}


def test_no_value_from_env_var_is_written_or_printed_wherever_it_is_allowed(tmp_path, monkeypatch):
    for name, value in PLANTED.items():
        monkeypatch.setenv(name, value)
    root = write_files(tmp_path / "p", EVERYWHERE)
    outputs = []
    for command in (["compile"], ["ls"], ["plan"], ["docs", "generate"], ["debug"]):
        result = Cli(root)(*command)
        assert result.exit_code in (0, 1), (command, result.output)
        outputs.append(result.stdout + result.stderr)
    assert (root / "target/manifest.json").is_file() and (root / "target/docs/index.html").is_file()
    assert (root / "target/compiled/labelled.sql").is_file()
    seen = (
        "\n".join(outputs)
        + _everything_written(root)
        + "".join(p.read_bytes().decode("latin-1") for p in (root / "target").rglob("*.pickle"))
    )
    for name, value in PLANTED.items():
        assert value[:12] not in seen, f"{name}'s value shows"
