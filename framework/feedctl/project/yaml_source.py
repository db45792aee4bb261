"""YAML documents that remember where every key and value came from.

Values are plain Python (dict, list, str, int, float, bool, None) so that JSON Schema can validate them;
positions live beside them, keyed by JSON path. Booleans follow YAML 1.2 (`true`/`false` only), so
`initial_scan: yes` stays the string CockroachDB users mean instead of turning into `True`.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

import yaml

from feedctl.diagnostics import Diagnostic, json_pointer

_BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BaseLoader):
    pass


# YAML 1.1 also reads yes/no/on/off as booleans; YAML 1.2 and CockroachDB option values do not.
_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in _BaseLoader.yaml_implicit_resolvers.copy().items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)

Path = tuple  # a JSON path: keys (str) and list indexes (int)

# Syntax errors about something opened and never closed (PyYAML's "context"): a quote, a [ or {, a key's :.
_UNCLOSED = ("while scanning a quoted scalar", "while parsing a flow", "while scanning a simple key")


@dataclass
class Position:
    line: int  # 1-based
    column: int  # 1-based


@dataclass
class YamlDocument:
    """A parsed file: its data, and the position of each value and each mapping key by JSON path."""

    file: str
    data: object
    values: dict[Path, Position] = field(default_factory=dict)
    kind: str = ""  # project, sinks or feeds, once read as one
    keys: dict[Path, Position] = field(default_factory=dict)

    def position(self, path: Path, key: bool = False) -> Position:
        """The nearest known position for `path`: the key itself, else the value, else its parents."""
        path = tuple(path)
        while True:
            if key and path in self.keys:
                return self.keys[path]
            if path in self.values:
                return self.values[path]
            if path in self.keys:
                return self.keys[path]
            if not path:
                return Position(1, 1)
            path = path[:-1]


class _Where:
    """Positions as an editor shows them: lines counted at line feeds alone. The parser (YAML 1.1) also breaks
    lines at U+2028, U+2029 and U+0085, which would shift every later line; its marks' character index is
    right, and counted from here."""

    def __init__(self, text: str):
        self.text = text
        # Without those breaks (nor a lone carriage return), the parser's own lines are the editor's.
        self.plain = not any(c in text for c in "\u2028\u2029\x85") and text.count("\r") == text.count("\r\n")
        self.lines = text.count("\n") + 1
        self._starts: list[int] | None = None

    def of(self, mark) -> Position:
        if self.plain:  # a mark past the end (an error noticed there) is at the end
            return (
                Position(mark.line + 1, mark.column + 1)
                if mark.line < self.lines
                else Position(self.lines, len(self.text) - self.text.rfind("\n"))
            )
        return self.at(mark.index)

    def at(self, index: int) -> Position:
        """The position of the character at `index` (the end, past it)."""
        if self._starts is None:
            self._starts = [0] + [i + 1 for i, c in enumerate(self.text) if c == "\n"]
        index = min(max(index, 0), len(self.text))
        line = bisect.bisect_right(self._starts, index)
        end = self._starts[line] - 1 if line < len(self._starts) else len(self.text)
        return Position(line, min(index - self._starts[line - 1], end - self._starts[line - 1]) + 1)

    def xy(self, node) -> tuple[int, int]:
        """Where a node or an event starts."""
        pos = self.of(node.start_mark)
        return pos.line, pos.column


def parse_yaml(text: str, file: str) -> tuple[YamlDocument | None, list[Diagnostic]]:
    """Parse one YAML document; syntax errors and duplicate keys become diagnostics."""
    loader = _Loader(text)
    where = _Where(text)
    try:
        deep = _too_deep(text, file, where)  # before composing: the composer recurses, in C, once per level
        if deep is not None:
            return None, [deep]
        node = loader.get_single_node()
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow
        pos = where.at(exc.position)
        shown = f" (U+{exc.character:04X})" if isinstance(exc.character, int) else ""
        return None, [Diagnostic(file, pos.line, pos.column, "FC003", f"YAML syntax error: {exc.reason}{shown}")]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = " ".join(str(p) for p in (exc.context, exc.problem) if p)
        if exc.context_mark and exc.problem_mark and str(exc.context or "").startswith(_UNCLOSED):
            # The parser notices an unclosed quote or bracket lines later; point at where it was opened.
            mark = exc.context_mark
            noticed = where.of(exc.problem_mark)
            what += f" (noticed at line {noticed.line}, column {noticed.column})"
        pos = where.of(mark) if mark else Position(1, 1)
        return None, [
            Diagnostic(
                file,
                pos.line,
                pos.column,
                "FC003",
                f"YAML syntax error: {what}",
                hint=_indentation_hint(text, pos.line) if mark else "",
            )
        ]
    except yaml.YAMLError as exc:
        return None, [Diagnostic(file, 1, 1, "FC003", f"YAML syntax error: {exc}")]
    finally:
        loader.dispose()
    doc = YamlDocument(file, None)
    if node is None:
        return doc, []
    build = _Build(doc, loader, where)
    try:
        doc.data = build.value(node, ())
    except _Expanded as exc:
        return None, [Diagnostic(file, *where.xy(exc.node), "FC003", str(exc))]
    if any(p.code == "FC003" for p in build.problems):  # a value that could not be read: as a syntax error is
        return None, build.problems
    return doc, build.problems


MAX_DEPTH = 64  # mappings and sequences nested in one another
MAX_VALUES = 100_000  # values of a document, its aliases expanded (a few hundred bytes of aliases can make billions)


def _too_deep(text: str, file: str, where: _Where) -> Diagnostic | None:
    depth = 0
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                return Diagnostic(
                    file,
                    *where.xy(event),
                    "FC003",
                    f"YAML nested more than {MAX_DEPTH} levels deep",
                    expected="a project file: a few levels of mappings and lists",
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
    return None


def _indentation_hint(text: str, line: int) -> str:
    """Most syntax errors in hand-written YAML are a line indented unlike its neighbours: say which, since the
    parser's words ("did not find expected key") do not, and it may notice only at the next line."""
    lines = text.splitlines()

    def indent(n: int) -> int:
        return len(lines[n - 1]) - len(lines[n - 1].lstrip(" "))

    def content(n: int) -> bool:
        return 0 < n <= len(lines) and bool(lines[n - 1].strip()) and not lines[n - 1].lstrip().startswith("#")

    here = [n for n in range(line, 0, -1) if content(n)][:3]  # the line and the two above it, blank ones aside
    for n, above in zip(here, here[1:]):
        opens = lines[above - 1].rstrip().endswith(":")  # a block under the line above: deeper is right
        back = indent(n) < indent(above) and indent(n) in {indent(k) for k in range(1, above) if content(k)}
        if (
            indent(n) != indent(above)
            and not (opens and indent(n) > indent(above))
            and not back
            and not lines[n - 1].lstrip().startswith("- ")
        ):
            return (
                f"check the indentation: line {n} is indented {indent(n)} spaces, line {above} above it "
                f"{indent(above)}; the keys of one mapping start in the same column"
            )
    return ""


class _Expanded(Exception):
    def __init__(self, message: str, node):
        super().__init__(message)
        self.node = node


class _Build:
    """The document's values as plain Python, with the position of each; every value counted, aliases
    expanded, against MAX_VALUES."""

    def __init__(self, doc: YamlDocument, loader, where: _Where):
        self.doc, self.loader, self.where = doc, loader, where
        self.problems: list[Diagnostic] = []
        self.values = 0
        self.open: set[int] = set()  # the collections being built, by identity: an alias to one is a cycle

    def value(self, node, path: Path):
        self.values += 1
        if self.values > MAX_VALUES:
            raise _Expanded(f"YAML document of more than {MAX_VALUES:,} values once its aliases are expanded", node)
        self.doc.values[path] = self.where.of(node.start_mark)
        if not isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
            return self.scalar(node)
        if id(node) in self.open:
            raise _Expanded("YAML alias refers to a collection that contains it (a recursive alias)", node)
        self.open.add(id(node))
        try:
            if isinstance(node, yaml.MappingNode):
                return self._mapping(node, path)
            return [self.value(child, path + (i,)) for i, child in enumerate(node.value)]
        finally:
            self.open.discard(id(node))

    def _mapping(self, node, path: Path) -> dict:
        out: dict = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                self.problems.append(
                    Diagnostic(
                        self.doc.file, *self.where.xy(key_node), "FC003", "YAML merge keys (<<) are not supported"
                    )
                )
                continue
            key = self.scalar(key_node)
            if not isinstance(key, str):
                key = str(key)
            if key in out:
                first = self.doc.keys[path + (key,)]
                self.problems.append(
                    Diagnostic(
                        self.doc.file,
                        *self.where.xy(key_node),
                        "FC004",
                        f'duplicate key "{key}" (first defined at line {first.line})',
                        json_path=json_pointer(path + (key,)),
                    )
                )
                continue
            self.doc.keys[path + (key,)] = self.where.of(key_node.start_mark)
            out[key] = self.value(value_node, path + (key,))
        return out

    def scalar(self, node):
        """A scalar as JSON's types have it; a tag that cannot read it (`!!int abc`, `!foo`, a bare `=`) is a
        diagnostic at the scalar, and the scalar's text stands for it."""
        if not isinstance(node, yaml.ScalarNode):
            self.problems.append(
                Diagnostic(
                    self.doc.file,
                    *self.where.xy(node),
                    "FC003",
                    "YAML key is a mapping or a list",
                    expected="a key that is a plain name",
                )
            )
            return yaml.serialize(node)[:40]
        try:
            value = self.loader.construct_object(node, deep=True)
        except (yaml.YAMLError, ValueError, OverflowError) as exc:
            reason = exc.problem if isinstance(exc, yaml.MarkedYAMLError) else str(exc).split(";")[0]
            tag = node.tag.replace("tag:yaml.org,2002:", "!!")
            self.problems.append(
                Diagnostic(
                    self.doc.file,
                    *self.where.xy(node),
                    "FC003",
                    f"YAML value {node.value[:40]!r} cannot be read as {tag}: {reason}",
                    expected="a plain value; tags such as !!int or !name are not needed",
                )
            )
            return node.value
        # Dates and binary become strings: feedctl's formats are JSON's.
        if not isinstance(value, (str, int, float, bool, type(None))):
            value = node.value
        return value
