"""Jinja for the project's templates (CDC queries, macros, YAML values), sandboxed. A feed file in a pull
request is compiled in CI: its templates must not reach Python's internals, the environment past `env_var()`,
or files other than the project's queries and macros, and their work is bounded (`Limits`), so that any input
compiles or fails within seconds and a few hundred megabytes.

What the sandbox refuses is a `TemplateRefused` (a `SecurityError`), which the compiler reports at the
template's line like any template error."""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import wraps
from pathlib import Path

import jinja2
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from feedctl.project.files import MAX_BYTES, Unreadable, read_text


@dataclass(frozen=True)
class Limits:
    output: int = 10 * 2**20  # characters of a rendered template, or of a string or list a template builds
    file_bytes: int = MAX_BYTES  # a query or macro file larger than this is refused
    integer_bits: int = 64 * 1024  # an integer a template computes
    seconds: float = 5.0  # rendering one template, macros included
    range_items: int = 100_000  # items of a template's range()


LIMITS = Limits()

# A width or precision of seven digits or more in a format string: `'%1000000000d' % 1` or
# `'{:>1000000000}'.format(1)` would allocate a gigabyte before any size is seen.
_HUGE_WIDTH = re.compile(r"(?:%[-+ #0]*|\{[^{}]*:[^{}]*?)\d{7,}")


class TemplateRefused(SecurityError):
    """A template did what the sandbox does not allow: the message says what, and the bound."""


def _check_size(value, limits: Limits):
    if isinstance(value, (str, list, tuple)) and len(value) > limits.output:
        raise TemplateRefused(
            f"a template built a value of {len(value):,} items, more than the {limits.output:,} allowed"
        )
    if isinstance(value, int) and value.bit_length() > limits.integer_bits:
        raise TemplateRefused(
            f"a template computed an integer of {value.bit_length():,} bits, more than the "
            f"{limits.integer_bits:,} allowed"
        )
    return value


def _check_format(pattern, limits: Limits) -> None:
    if isinstance(pattern, str) and _HUGE_WIDTH.search(pattern):
        raise TemplateRefused("a format width or precision of a million characters or more")


# Filters and str methods whose numbers are widths or counts of what they build (other numbers, such as a
# `default(100000000)`, are values, and free).
_WIDTHS = frozenset(
    {"center", "ljust", "rjust", "zfill", "expandtabs", "indent", "wordwrap", "truncate", "batch", "slice", "format"}
)


def _check_widths(name: str, args: tuple, kwargs: dict, limits: Limits) -> None:
    for value in (*args, *kwargs.values()):
        if isinstance(value, int) and not isinstance(value, bool) and value > limits.output:
            raise TemplateRefused(
                f"{name} given {value:,}: more than the {limits.output:,} characters a template may build"
            )
        _check_format(value, limits)


def _check_replace(text, old, new, limits: Limits) -> None:
    """`replace` of a short string by a long one multiplies a value's size before it can be seen."""
    if (
        isinstance(text, str)
        and isinstance(old, str)
        and isinstance(new, str)
        and (len(text) + 1) * max(len(new) - len(old), 0) // max(len(old), 1) > limits.output
    ):
        raise TemplateRefused(f"a replace that could build more than the {limits.output:,} characters allowed")


class Sandbox(ImmutableSandboxedEnvironment):
    """The sandbox with feedctl's bounds: repetition, powers, format widths and filters' widths checked
    before they allocate, every value a template builds checked after, and the time a render takes."""

    intercepted_binops = frozenset({"*", "**", "%", "+"})

    def __init__(self, limits: Limits = LIMITS, **options):
        super().__init__(undefined=jinja2.StrictUndefined, autoescape=False, **options)
        self.limits = limits
        self.globals["range"] = self._range
        self.filters = {name: self._bounded(name, f) for name, f in self.filters.items()}

    def _range(self, *args: int) -> range:
        numbers = range(*args)
        if len(numbers) > self.limits.range_items:
            raise TemplateRefused(
                f"a range of {len(numbers):,} items, more than the {self.limits.range_items:,} allowed"
            )
        return numbers

    def call_binop(self, context, operator: str, left, right):
        limits = self.limits
        if operator == "*":
            for seq, times in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and isinstance(times, int) and len(seq) * times > limits.output:
                    raise TemplateRefused(
                        f"a template repeated a value to {len(seq) * times:,} items, more than "
                        f"the {limits.output:,} allowed"
                    )
            if (
                isinstance(left, int)
                and isinstance(right, int)
                and left.bit_length() + right.bit_length() > limits.integer_bits
            ):
                raise TemplateRefused(f"a template computed an integer of more than {limits.integer_bits:,} bits")
        if (
            operator == "**"
            and isinstance(left, int)
            and isinstance(right, int)
            and right > 0
            and max(left.bit_length(), 1) * right > limits.integer_bits
        ):
            raise TemplateRefused(f"a template computed an integer of more than {limits.integer_bits:,} bits")
        if operator == "%":
            _check_format(left, limits)
        return _check_size(super().call_binop(context, operator, left, right), limits)

    def call(__self, __context, __obj, *args, **kwargs):  # noqa: N805 (the sandbox's own signature)
        name, bound = getattr(__obj, "__name__", ""), getattr(__obj, "__self__", None)
        if isinstance(bound, str) and name in _WIDTHS:
            _check_widths(name, args, kwargs, __self.limits)  # 'x'.ljust(10**9)
        if isinstance(bound, str) and name == "replace" and len(args) >= 2:
            _check_replace(bound, args[0], args[1], __self.limits)
        return _check_size(super().call(__context, __obj, *args, **kwargs), __self.limits)

    def wrap_str_format(self, value):
        wrapped = super().wrap_str_format(value)
        if wrapped is not None:
            _check_format(value.__self__, self.limits)
        return wrapped

    def _bounded(self, name: str, f: Callable) -> Callable:
        """A filter whose widths and format strings are checked before it runs, and its result after."""
        limits = self.limits

        @wraps(f)
        def bounded(*args, **kwargs):
            if name in _WIDTHS:
                _check_widths(name, args, kwargs, limits)
            if name == "replace" and len(args) >= 4:  # (eval_ctx, s, old, new)
                _check_replace(args[1], args[2], args[3], limits)
            return _check_size(f(*args, **kwargs), limits)

        return bounded

    def render(self, template: jinja2.Template, **context) -> str:
        """`template` rendered within the time bound, its output within the size bound."""
        with _Deadline(self.limits.seconds):
            return _check_size(template.render(**context), self.limits)

    def module(self, template: jinja2.Template):
        """A macro file's module (its top level run), within the time bound."""
        with _Deadline(self.limits.seconds):
            try:
                return template.module
            except Exception:  # its traceback at the template's lines, as a render's is (Jinja does not, here)
                self.handle_exception()


class _Deadline:
    """Stops a render that runs past `seconds`: a trace function on the templates' own frames (Jinja compiles
    a template to Python code named after its file: a .sql file, or `<template>` for a YAML value), checking
    the clock every thousand lines they run."""

    def __init__(self, seconds: float):
        self.seconds, self.lines = seconds, 0

    def __enter__(self):
        self.until, self.previous = time.monotonic() + self.seconds, sys.gettrace()
        sys.settrace(self._call)
        return self

    def __exit__(self, *exc):
        sys.settrace(self.previous)

    def _call(self, frame, event, arg):
        if frame.f_code.co_filename.endswith((".sql", "<template>")):
            return self._line
        return None

    def _line(self, frame, event, arg):
        self.lines += 1
        if self.lines % 1000 == 0 and time.monotonic() > self.until:
            raise TemplateRefused(f"rendering took more than {self.seconds:g} s")
        return self._line


class ProjectFiles(jinja2.BaseLoader):
    """Only the project's macros and the queries being rendered: no other file of the project, none outside
    it; a file that is not a regular file, or larger than the bound, is refused."""

    def __init__(self, root: Path, macros: Iterable[str], limits: Limits = LIMITS):
        self.root, self.allowed, self.limits = root, set(macros), limits

    def allow(self, name: str) -> None:
        self.allowed.add(name)

    def get_source(self, environment, template: str):
        if template not in self.allowed:
            raise jinja2.TemplateNotFound(
                template, f"{template}: a template may include or import only the project's macros (macros/)"
            )
        path = self.root / template
        try:
            if not path.exists():
                raise jinja2.TemplateNotFound(template)
            source, mtime = read_text(path, self.limits.file_bytes), path.stat().st_mtime
        except (Unreadable, OSError) as exc:
            raise TemplateRefused(f"{template}: {exc}") from None
        return source, str(path), lambda: path.stat().st_mtime == mtime
