"""The package's shape, held as data: the import rules of ARCHITECTURE.md, and where each kind of sink is
named."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import feedctl

PACKAGE = Path(feedctl.__file__).parent
SINK_KINDS = re.compile(r"""["'](cloudstorage|kafka|webhook)["']""")
# Where a sink's kind may be named: the sinks themselves, the project's option rules, the judge, test support.
KIND_FOLDERS = {"sinks", "project", "verify", "testing"}


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """The package's modules that `name` imports, at its top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        found.update(t for t in targets if t in MODULES and t != name and t != "feedctl")
    return found


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _folder(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and MODULES[name].name == "__init__.py") else ""


def test_no_import_circle():
    index, low, stack, on_stack, circles = {}, {}, [], set(), []

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in GRAPH:
        if v not in index:
            visit(v)
    assert circles == []


def test_nothing_imports_the_cli_or_a_command():
    """But the manual's reference, which sits above them: it documents the commands' flags and output."""
    offenders = {
        name: sorted(t for t in targets if t.startswith(("feedctl.cli", "feedctl.commands")))
        for name, targets in GRAPH.items()
        if not name.startswith(("feedctl.cli", "feedctl.commands", "feedctl.manual"))
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def _reaching(folders: tuple[str, ...], below: tuple[str, ...]) -> dict[str, list[str]]:
    """Modules of `folders` that import a module of `below`'s folders."""
    offenders = {
        name: sorted(t for t in targets if _folder(t) in below)
        for name, targets in GRAPH.items()
        if _folder(name) in folders
    }
    return {k: v for k, v in offenders.items() if v}


# The roles of a changefeed, from the top: a node runs jobs, a coordinator steps one, a job is its definition.
ROLES = ("node", "coordinator", "job")


def test_the_roles_import_downwards_only():
    """A node runs the coordinator, the coordinator steps the job: never the other way."""
    assert _reaching(("job",), ("coordinator", "node")) == {}
    assert _reaching(("coordinator",), ("node",)) == {}


def test_the_state_store_knows_no_role():
    """`state/` is the store's entities, a module each; the roles that step jobs write through it, never the other
    way. A job's definition is text to it: its codec lives with the definition (`job/definition.py`)."""
    assert _reaching(("state",), ROLES) == {}


def test_sinks_and_encoders_know_nothing_of_jobs():
    assert _reaching(("sinks", "encoding"), (*ROLES, "tasks", "verify", "state")) == {}


def test_reading_and_the_spark_tasks_know_nothing_of_jobs():
    """`source/` reads Delta and `tasks/` is what a Spark worker runs: neither knows the job nor the judge."""
    assert _reaching(("source",), (*ROLES, "tasks", "verify")) == {}
    assert _reaching(("tasks",), (*ROLES, "verify", "state")) == {}


def test_nothing_the_judge_judges_imports_it():
    """`verify/` reads sinks and tables on its own: what it judges never calls back into it."""
    judged = ("sinks", "encoding", "source", "tasks", *ROLES, "state", "compiler", "project")
    assert _reaching(judged, ("verify",)) == {}


def test_few_modules_at_the_root():
    """A module's size is no rule (`ruff format` shapes the code, and a module is split by responsibility,
    never squeezed under a number); the root holds only what every folder uses."""
    assert len(list(PACKAGE.glob("*.py"))) <= 8


def test_a_sink_kind_is_named_in_at_most_one_module_outside_the_sinks():
    naming = [
        name
        for name, path in MODULES.items()
        if _folder(name) not in KIND_FOLDERS and SINK_KINDS.search(path.read_text())
    ]
    assert len(naming) <= 1, naming


# Processes a node starts for its own work, not servers for tests: its file writer (`sinks/local_files.py`).
NODE_PROCESSES = {"feedctl.sinks.local_files"}


def test_dev_servers_and_fault_knobs_live_under_testing():
    servers = [
        name
        for name, path in MODULES.items()
        if name not in NODE_PROCESSES
        and re.search(r"subprocess\.Popen|ThreadingHTTPServer|os\.killpg", path.read_text())
    ]
    assert servers and all(_folder(name) == "testing" for name in servers), servers


def test_only_the_command_line_imports_what_exists_to_test_feedctl():
    """Test hooks reach a run through its settings (`coordinator/knobs.py`), set by the command line."""
    offenders = {
        name: sorted(t for t in targets if t.startswith("feedctl.testing"))
        for name, targets in GRAPH.items()
        if _folder(name) not in ("testing", "cli", "commands")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_a_spark_task_imports_neither_the_state_store_nor_the_compiler_front():
    """Every Python worker imports what a task's body needs: SQLAlchemy, YAML and Jinja would add their
    import time to each worker's start."""
    import subprocess
    import sys

    probe = (
        "import sys, feedctl.tasks.batch; "
        "print(sorted(m for m in ('sqlalchemy', 'yaml', 'jinja2', 'jsonschema', 'click') if m in sys.modules))"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"
