"""The reference page of the diagnostic codes: each code, a small project mistake that produces it, and what
feedctl prints for it, got by running the example at each build (so the page shows today's message)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from feedctl.diagnostics import CODES
from feedctl.manual.code_examples import BASE, EXAMPLES, CodeExample

GROUPS = {
    "FC0": "Files and YAML",
    "FC1": "JSON Schema",
    "FC2": "References between files",
    "FC3": "Option combinations",
    "FC4": "Jinja templates",
    "FC5": "CDC queries and columns",
    "FC6": "The command line",
    "FC7": "Unit tests",
}


def write_project(example: CodeExample, root: Path) -> None:
    """The base project with the example's files laid over it, and its removed files gone."""
    for path, text in {**BASE, **example.files}.items():
        if path in example.removes:
            continue
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def run(example: CodeExample, root: Path) -> tuple[int, str]:
    """The example's command run on it, in this process: its exit code and what it printed."""
    from click.testing import CliRunner

    from feedctl.cli import main

    write_project(example, root)
    arguments = ["--project-dir", str(root), *example.command]
    result = CliRunner().invoke(main, arguments, env=example.env, catch_exceptions=False)  # None: unset
    return result.exit_code, result.output


def _fence(text: str, language: str = "") -> list[str]:
    return [f"```{language}", text.rstrip("\n"), "```", ""]


def _language(path: str) -> str:
    return {"yml": "yaml", "yaml": "yaml", "sql": "sql", "json": "json"}.get(path.rsplit(".", 1)[-1], "")


def code_section(code: str, example: CodeExample, output: str) -> list[str]:
    lines = [f"### {code} {CODES[code]} {{#{code.lower()}}}", ""]
    if example.note:
        lines += [example.note, ""]
    for path, text in example.files.items():
        if "_delta_log/" in path:
            continue  # a table the example declares: its log is no reading
        lines += [f"`{path}`:", "", *_fence(text, _language(path))]
    for path in example.removes:
        lines += [f"Without `{path}`.", ""]
    env = " ".join(f"{k}={v}" if v is not None else f"(no {k})" for k, v in example.env.items())
    lines += [
        "```console",
        f"$ {env + ' ' if env else ''}feedctl {' '.join(example.command)}",
        output.rstrip(),
        "```",
        "",
    ]
    return lines


def diagnostics_page() -> str:
    lines = [
        "# Diagnostic codes",
        "",
        "Every problem feedctl finds in a project has a stable code (match on it, never on the message), the "
        "file, line and column, the JSON path inside a YAML document, what was expected and, for a typo, the "
        "nearest valid spelling. Each code below comes with a small mistake that produces it and what feedctl "
        "prints for it: the examples are run, against a small project, at each build of this manual.",
        "",
        "The project the examples change:",
        "",
    ]
    for path, text in BASE.items():
        if "_delta_log/" not in path:
            lines += [f"`{path}`:", "", *_fence(text, _language(path))]
    group = None
    with tempfile.TemporaryDirectory(prefix="feedctl-codes-") as tmp:
        for code in sorted(CODES):
            if code[:3] != group:
                group = code[:3]
                lines += [f"## {GROUPS.get(group, group)}", ""]
            example = EXAMPLES[code]
            root = Path(tmp) / code
            output = run(example, root)[1] if example.files or example.removes else ""
            lines += code_section(code, example, output.replace(f"{root}/", "").replace(str(root), "."))
    return "\n".join(lines)
