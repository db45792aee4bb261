"""Render CDC queries with Jinja, sandboxed (`project/templates.py`): the project's macros, `source()`, `var()`
and `env_var()`."""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field, replace
from pathlib import Path

import jinja2
from jinja2.exceptions import SecurityError
from jinja2.runtime import Macro

from feedctl.diagnostics import Diagnostic, did_you_mean
from feedctl.project.env_vars import EnvVarUnset, env_var
from feedctl.project.model import Project
from feedctl.project.templates import ProjectFiles, Sandbox

_MISSING = object()


class _SourceUnknown(Exception):
    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


class _VarUndefined(Exception):
    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


@dataclass
class Rendered:
    sql: str | None
    sources: list[str] = field(default_factory=list)  # tables named through source()
    secrets: list[str] = field(default_factory=list)  # values read from env_var(), directly or through var()
    problems: list[Diagnostic] = field(default_factory=list)


def quote_ident(name: str) -> str:
    simple = name.replace("_", "a").isalnum() and not name[0].isdigit()
    return name if simple else "`" + name.replace("`", "``") + "`"


class QueryRenderer:
    """One Jinja environment per compile: macros are loaded once and shared by every query."""

    def __init__(self, project: Project, vars_override: dict | None = None):
        self.project = project
        self.vars = {**project.vars, **(vars_override or {})}
        self.files = ProjectFiles(project.root, project.macro_files)
        self.env = Sandbox(loader=self.files, keep_trailing_newline=True)
        self.problems: list[Diagnostic] = []
        self._current: Rendered | None = None
        self._macro_secrets: list[str] = []  # read by a macro file's top level: in every query's reach
        self.env.globals.update(source=self._source, var=self._var, env_var=self._env_var)
        for macro_file in project.macro_files:
            self._load_macros(macro_file)

    def _load_macros(self, macro_file: str) -> None:
        try:
            module = self.env.module(self.env.get_template(macro_file))
        except jinja2.TemplateSyntaxError as exc:
            self.problems.append(
                Diagnostic(macro_file, exc.lineno or 1, 1, "FC406", f"macro file does not parse: {exc.message}")
            )
            return
        except Exception as exc:  # a macro file's top level raised: report where
            self.problems.append(self._runtime_problem(exc, macro_file, "FC406"))
            return
        for name in dir(module):
            value = getattr(module, name)
            if isinstance(value, Macro):
                self.env.globals[name] = value

    def _source(self, source_name: str, table_name: str) -> str:
        fqn = f"{source_name}.{table_name}"
        if fqn not in self.project.tables:
            raise _SourceUnknown(fqn)
        if self._current is not None:
            self._current.sources.append(fqn)
        return f"{quote_ident(source_name)}.{quote_ident(table_name)}"

    def _var(self, name: str, default=_MISSING):
        if name in self.vars:
            value = self.vars[name]
            if (
                self._current is not None
                and name in self.project.vars
                and value == self.project.vars[name]
                and self.project.vars_display.get(name) != value
            ):  # its value came from env_var()
                self._current.secrets.extend(_strings(value))
            return value
        if default is _MISSING:
            raise _VarUndefined(name)
        return default

    def _env_var(self, name: str, default=_MISSING):
        value = env_var(name) if default is _MISSING else env_var(name, default)
        (self._current.secrets if self._current is not None else self._macro_secrets).append(str(value))
        return value

    def render(self, query_file: str) -> Rendered:
        result = Rendered(sql=None, secrets=list(self._macro_secrets))
        self._current = result
        try:
            self.files.allow(query_file)
            result.sql = self.env.render(self.env.get_template(query_file))
        except jinja2.TemplateSyntaxError as exc:
            file = _relative(self.project.root, exc.filename) or query_file
            result.problems.append(Diagnostic(file, exc.lineno or 1, 1, "FC401", f"Jinja syntax error: {exc.message}"))
        except Exception as exc:
            result.problems.append(self._runtime_problem(exc, query_file))
        finally:
            self._current = None
        return result

    def _runtime_problem(self, exc: Exception, default_file: str, code: str | None = None) -> Diagnostic:
        """At the template line that raised; in a macro, with the line of the query that called it."""
        sites = [
            (rel, frame.lineno or 1)
            for frame in traceback.extract_tb(exc.__traceback__)
            if (rel := _relative(self.project.root, frame.filename)) and rel.endswith(".sql")
        ]
        file, line = sites[-1] if sites else (default_file, 1)
        problem = self._problem(exc, file, line, code)
        callers = [f"{f}:{n}" for f, n in sites if f != file]
        if callers:
            problem = replace(problem, hint="; ".join(filter(None, [problem.hint, f"called from {callers[-1]}"])))
        return problem

    def _problem(self, exc: Exception, file: str, line: int, code: str | None) -> Diagnostic:
        if isinstance(exc, _SourceUnknown):
            return Diagnostic(
                file,
                line,
                1,
                "FC405",
                f'unknown source table "{exc.name}"',
                expected="source('<source>', '<table>') of a table declared in project.yml",
                hint=did_you_mean(exc.name, self.project.tables),
            )
        if isinstance(exc, _VarUndefined):
            return Diagnostic(
                file,
                line,
                1,
                "FC404",
                f'var "{exc.name}" is not defined',
                expected=f"{exc.name} under vars: in project.yml, --vars, or var('{exc.name}', default)",
                hint=did_you_mean(exc.name, self.vars),
            )
        if isinstance(exc, EnvVarUnset):
            return Diagnostic(
                file,
                line,
                1,
                "FC403",
                f'environment variable "{exc.name}" is not set and env_var() has no default',
                expected=f"{exc.name} set, or env_var('{exc.name}', 'default')",
            )
        if isinstance(exc, SecurityError):  # TemplateRefused, or an unsafe attribute
            return Diagnostic(
                file,
                line,
                1,
                "FC407",
                f"refused by the template sandbox: {exc}",
                expected="a template that uses its project's macros, var(), env_var() and source(), "
                "within the bounds the manual gives (docs/guides/projects.md)",
            )
        if isinstance(exc, jinja2.UndefinedError):
            known = [k for k in self.env.globals if not k.startswith("_")]
            name = str(exc.message or exc).split("'")[1] if "'" in str(exc) else ""
            return Diagnostic(
                file,
                line,
                1,
                "FC402",
                f"undefined in template: {exc.message or exc}",
                hint=did_you_mean(name, known) if name else "",
            )
        return Diagnostic(file, line, 1, code or "FC402", f"template error: {type(exc).__name__}: {exc}")


def _relative(root: Path, filename: str | None) -> str | None:
    if not filename:
        return None
    try:
        return Path(filename).resolve().relative_to(root).as_posix()
    except ValueError:
        return None


def _strings(value) -> list[str]:
    """The strings inside a var's value (a var may hold a list or a mapping)."""
    if isinstance(value, dict):
        return [t for v in value.values() for t in _strings(v)]
    if isinstance(value, list):
        return [t for v in value for t in _strings(v)]
    return [str(value)]
