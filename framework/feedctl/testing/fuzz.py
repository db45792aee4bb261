"""Fuzzing the project's inputs: a small project whose files and flags are mutated (keys deleted,
duplicated and retyped, YAML edge cases, Jinja and SQL fragments, bytes), each mutant run through a command in
this process. What a user must get back is judged by `judge`: exit 0, or 1 or 2 with well-formed diagnostics
inside the files they name; never an internal error; never the planted secret in the output or in target/.

Used by the quick test (a few examples) and by `make fuzz` (`bench/fuzz.py`, for minutes)."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import yaml
from hypothesis import strategies as st

# Set in the environment of the process that runs mutants; longer than a diagnostic quotes.
SECRET_NAME, SECRET = "FEEDCTL_FUZZ_TOKEN", "fuzz-planted-" + "s" * 70

SEED = {
    "project.yml": """\
name: shop
config-version: 1
spark:
  conf: {spark.sql.shuffle.partitions: "4"}
sources:
  - name: shop
    tables:
      - {name: orders, path: target/warehouse/shop/orders, primary_key: [id], spans: 2}
      - name: customers
        path: target/warehouse/shop/customers
        primary_key: [region, id]
        locality: region=us-east1
vars:
  min_total: 10
""",
    "sinks/sinks.yml": """\
sinks:
  - name: files
    uri: file://target/sink/files
    options: {file_size: 16MiB}
  - name: hook
    uri: "webhook-https://hooks.example.com/in?token={{ env_var('FEEDCTL_FUZZ_TOKEN') }}"
    options:
      extra_headers: {X-Team: shop}
""",
    "feeds/feeds.yml": """\
feeds:
  - name: orders
    description: Every order.
    tables: [shop.orders]
    sink: files
    tags: [shop]
    options: {resolved: 10s, diff: true, updated: true}
  - name: big_orders
    query: big_orders.sql
    sink: hook
    options: {envelope: wrapped, initial_scan: "no"}
    meta: {owner: sales}
""",
    "feeds/big_orders.sql": """\
SELECT id, total, {{ cents('total') }} AS total_cents
FROM {{ source('shop', 'orders') }}
WHERE total > {{ var('min_total') }}
""",
    "macros/money.sql": "{% macro cents(column) -%}\nCAST({{ column }} * 100 AS BIGINT)\n{%- endmacro %}\n",
}

COMMANDS = (["compile"], ["ls"], ["plan"], ["docs", "generate"], ["schemas", "freeze"], ["debug"])

YAML_EDGES = [
    "!!int abc",
    "!foo bar",
    "=",
    "&a [*a]",
    "[" * 300,
    "{a: " * 80,
    "1" * 5000,
    "\x07",
    "\u2028",
    "~",
    "null",
    "yes",
    "0x1F",
    "1e999",
    "-.inf",
    ".nan",
    "2001-12-14t21:59:43.10-05:00",
    "!!binary aGVsbG8=",
    "''",
    '"\\x00"',
    "? [a, b]\n: 1",
    "- - - -",
    "*undefined",
    "|\n  block",
    ">-\n  folded",
    "%YAML 1.1",
    '"\\udcff"',
    '"\\x85"',
    "kafka://[::1",
    "0o777",
    "<<: {a: 1}",
]
STATE_URLS = [
    "postgresql://",
    "postgresql://u:pw@127.0.0.1:1/db",
    "sqlite:///target",
    "sqlite:////dev/null/x",
    "garbage",
    "mysql://h/db",
    "sqlite://",
    "postgresql+psycopg://[::1/db",
    "sqlite:///target/state.db?mode=ro",
]
DAMAGED_MANIFESTS = ["", "{", "[]", '{"metadata": 5}', '{"feeds": {"x": 1}}', "\xff\xfe", "null"]
JINJA_EDGES = [
    "{{",
    "}}",
    "{% for %}",
    "{{ cycler.__init__.__globals__.os.popen('id').read() }}",
    "{{ 1/0 }}",
    "{{ env_var(5) }}",
    "{{ env_var() }}",
    "{% include 'project.yml' %}",
    "{{ 'x' * 10**9 }}",
    "{{ range(10**9) | list }}",
    "{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}",
    "{{ var('nope') }}",
    "{{ source('shop', 'nope') }}",
    "{{ lipsum.__globals__ }}",
    "{{ '%1000000000d' % 1 }}",
    "{% raw %}",
    "{{ env_var('FEEDCTL_FUZZ_TOKEN') }}",
    "\udcff",
]
SQL_EDGES = [
    "(" * 200,
    "a AND " * 1000 + "b",
    "'unterminated",
    "SELECT",
    ";",
    "; DROP TABLE x",
    "JOIN shop.customers c",
    "GROUP BY id",
    "ORDER BY id",
    "LIMIT 1",
    "rand()",
    "/* open",
    "-- ",
    "`weird column`",
    "id" + ", id" * 3000,
]
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True),
    st.text(max_size=30),
    st.sampled_from(YAML_EDGES),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=8), st.integers(), max_size=3),
)


@dataclass(frozen=True)
class Mutant:
    files: dict[str, str | bytes]  # the project's files, mutated
    command: list[str]
    what: str  # the mutation, for a failure's message


@st.composite
def mutants(draw) -> Mutant:
    files: dict[str, str | bytes] = dict(SEED)
    name = draw(st.sampled_from(sorted(SEED)))
    kind = draw(
        st.sampled_from(
            ["structure", "text", "bytes", "flags", "state"] if name.endswith(".yml") else ["text", "bytes", "flags"]
        )
    )
    command = draw(st.sampled_from(COMMANDS))
    if kind == "flags":  # --vars, and a previous manifest for plan --state, from the edges
        if draw(st.booleans()):
            files["prod/manifest.json"] = draw(st.sampled_from(DAMAGED_MANIFESTS))
            command = ["plan", "--state", "./prod"]
        else:
            edge = draw(st.one_of(st.sampled_from(YAML_EDGES), st.text(max_size=20)))
            command = [*command, "--vars", edge] if command[0] in ("compile", "ls", "plan") else command
        return Mutant(files, command, f"flags {command[1:]}")
    if kind == "state":
        url = draw(st.sampled_from(STATE_URLS))
        files["project.yml"] = SEED["project.yml"] + f"state: {json.dumps(url)}\n"
        return Mutant(
            files, draw(st.sampled_from([["plan"], ["debug"], ["docs", "generate"], ["ls"]])), f"state: {url}"
        )
    if kind == "structure":
        data = yaml.safe_load(SEED[name])
        path, what = _mutate(draw, data)
        files[name] = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
        what = f"{name}: {what} at {path}"
    elif kind == "text":
        lines = SEED[name].split("\n")
        at = draw(st.integers(0, len(lines) - 1))
        fragment = draw(st.sampled_from(YAML_EDGES if name.endswith(".yml") else JINJA_EDGES + SQL_EDGES))
        column = draw(st.integers(0, len(lines[at])))
        lines[at] = lines[at][:column] + fragment + lines[at][column:]
        files[name] = "\n".join(lines)
        what = f"{name}: {fragment[:40]!r} inserted at line {at + 1}, column {column + 1}"
    else:
        raw = bytearray(SEED[name].encode())
        at = draw(st.integers(0, len(raw) - 1))
        raw[at] = draw(st.integers(0, 255))
        files[name] = bytes(raw)
        what = f"{name}: byte {at} set to {raw[at]}"
    return Mutant(files, command, what)


def _mutate(draw, data) -> tuple[tuple, str]:
    """One structural change somewhere in `data`, in place."""
    path, node = (), data
    while isinstance(node, (dict, list)) and node and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(node, key=str) if isinstance(node, dict) else range(len(node))))
        path, parent, node = path + (key,), node, node[key]
    target = parent if path else None
    if target is None:
        return (), "kept whole"
    key = path[-1]
    action = draw(st.sampled_from(["delete", "retype", "misspell", "duplicate"]))
    if action == "delete":
        del target[key]
    elif action == "retype":
        target[key] = draw(VALUES)
    elif action == "misspell" and isinstance(target, dict):
        target[str(key) + draw(st.sampled_from(["s", "_", "x"]))] = target.pop(key)
    elif isinstance(target, list):
        target.append(target[key])
    else:
        target[str(key).upper()] = target[key]
    return path, action


def write(root: Path, files: dict[str, str | bytes]) -> Path:
    """The mutant's project at `root` (what was there before removed)."""
    if root.exists():
        shutil.rmtree(root)
    for relative, content in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8", errors="surrogateescape")
    return root


@dataclass(frozen=True)
class Answer:
    """What a command run in this process gave back (with `--log-format json`)."""

    exit_code: int
    output: str  # stdout and stderr
    exception: BaseException | None  # raised out of the command: an internal error, unless a SystemExit


def arguments(root: Path, command: list[str]) -> list[str]:
    """The command line a mutant is run with: JSON diagnostics to judge; `./x` is the project's x."""
    return [
        "--project-dir",
        str(root),
        "--log-format",
        "json",
        *(str(root / a[2:]) if a.startswith("./") else a for a in command),
    ]


def judge(root: Path, answer: Answer) -> list[str]:
    """What is wrong with feedctl's `answer` on the project at `root` (nothing: fine)."""
    wrong = []
    if answer.exception is not None and not isinstance(answer.exception, SystemExit):
        wrong.append(f"internal error: {type(answer.exception).__name__}: {answer.exception}")
    for line in answer.output.splitlines():  # what feedctl says of an exception it did not expect
        if "run with --debug for the traceback" in line:
            wrong.append(f"internal error: {line[:300]}")
    if answer.exit_code not in (0, 1, 2):
        wrong.append(f"exit {answer.exit_code}")
    for line in answer.output.splitlines():
        record = _json(line)
        if record is not None and record.get("event") == "diagnostic":
            wrong.extend(_misplaced(root, record))
    if SECRET[:20] in answer.output:
        wrong.append("the planted secret is in the output")
    target = root / "target"
    for path in target.rglob("*") if target.is_dir() else []:
        if path.is_file() and SECRET[:20].encode() in path.read_bytes():
            wrong.append(f"the planted secret is in {path.relative_to(root)}")
    return wrong


def _json(line: str) -> dict | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def _misplaced(root: Path, d: dict) -> list[str]:
    """A diagnostic must name a file of the project (or say none) and a position inside it."""
    file, line, column = d.get("file", ""), d.get("line", 0), d.get("column", 0)
    if not file or file.startswith("--") or line == 0:
        return []
    path = Path(file) if Path(file).is_absolute() else root / file
    if not path.is_file():
        return [f"{d.get('code')} names {file}, not a file of the project"]
    lines = path.read_bytes().decode("utf-8", errors="replace").split("\n")
    if not 1 <= line <= len(lines) or not 1 <= column <= len(lines[line - 1]) + 1:
        return [f"{d.get('code')} at {file}:{line}:{column}, outside the file ({len(lines)} lines)"]
    return []
