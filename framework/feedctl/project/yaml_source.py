"""YAML documents that remember where every key and value came from.

Values are plain Python (dict, list, str, int, float, bool, None) so that JSON Schema can validate them;
positions live beside them, keyed by JSON path. Booleans follow YAML 1.2 (`true`/`false` only), so
`initial_scan: yes` stays the string CockroachDB users mean instead of turning into `True`.
"""

from __future__ import annotations

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


def _pos(mark) -> Position:
    return Position(mark.line + 1, mark.column + 1)


def parse_yaml(text: str, file: str) -> tuple[YamlDocument | None, list[Diagnostic]]:
    """Parse one YAML document; syntax errors and duplicate keys become diagnostics."""
    loader = _Loader(text)
    problems: list[Diagnostic] = []
    try:
        deep = _too_deep(text, file)  # before composing: the composer recurses, in C, once per level
        if deep is not None:
            return None, [deep]
        node = loader.get_single_node()
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow: its position, counted in lines
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        return None, [Diagnostic(file, line, column, "FC003", f"YAML syntax error: {exc.reason} "
                                                              f"(U+{exc.character:04X})" if isinstance(exc.character, int)
                                 else f"YAML syntax error: {exc.reason}")]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = " ".join(str(p) for p in (exc.context, exc.problem) if p)
        if exc.context_mark and exc.problem_mark and str(exc.context or "").startswith(_UNCLOSED):
            # The parser notices an unclosed quote or bracket lines later; point at where it was opened.
            mark = exc.context_mark
            what += f" (noticed at line {exc.problem_mark.line + 1}, column {exc.problem_mark.column + 1})"
        pos = _pos(mark) if mark else Position(1, 1)
        return None, [Diagnostic(file, pos.line, pos.column, "FC003", f"YAML syntax error: {what}",
                                 hint=_indentation_hint(text, pos.line) if mark else "")]
    except yaml.YAMLError as exc:
        return None, [Diagnostic(file, 1, 1, "FC003", f"YAML syntax error: {exc}")]
    finally:
        loader.dispose()
    doc = YamlDocument(file, None)
    if node is None:
        return doc, problems
    try:
        doc.data = _build(node, (), doc, loader, problems, _Budget(), frozenset())
    except _Expanded as exc:
        return None, [Diagnostic(file, *_xy(exc.node), "FC003", str(exc))]
    if any(p.code == "FC003" for p in problems):  # a value that could not be read: as a syntax error is
        return None, problems
    return doc, problems


MAX_DEPTH = 64  # mappings and sequences nested in one another
MAX_VALUES = 100_000  # values of a document, its aliases expanded (a few hundred bytes of aliases can make billions)


def _too_deep(text: str, file: str) -> Diagnostic | None:
    depth = 0
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                return Diagnostic(file, *_xy(event), "FC003", f"YAML nested more than {MAX_DEPTH} levels deep",
                                  expected="a project file: a few levels of mappings and lists")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
    return None


class _Expanded(Exception):
    def __init__(self, message: str, node):
        super().__init__(message)
        self.node = node


class _Budget:
    def __init__(self):
        self.values = 0

    def spend(self, node) -> None:
        self.values += 1
        if self.values > MAX_VALUES:
            raise _Expanded(f"YAML document of more than {MAX_VALUES:,} values once its aliases are expanded", node)


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
        if indent(n) != indent(above) and not (opens and indent(n) > indent(above)) and not back and \
                not lines[n - 1].lstrip().startswith("- "):
            return (f"check the indentation: line {n} is indented {indent(n)} spaces, line {above} above it "
                    f"{indent(above)}; the keys of one mapping start in the same column")
    return ""


def _build(node, path: Path, doc: YamlDocument, loader, problems: list[Diagnostic], budget: _Budget,
           within: frozenset[int]):
    """`within`: the collections this value is inside of, by identity: an alias to one of them is a cycle."""
    budget.spend(node)
    if id(node) in within:
        raise _Expanded("YAML alias refers to a collection that contains it (a recursive alias)", node)
    doc.values[path] = _pos(node.start_mark)
    if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
        within = within | {id(node)}
    if isinstance(node, yaml.MappingNode):
        out: dict = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                problems.append(
                    Diagnostic(doc.file, *_xy(key_node), "FC003", "YAML merge keys (<<) are not supported")
                )
                continue
            key = _construct(key_node, loader, doc, problems)
            if not isinstance(key, str):
                key = str(key)
            if key in out:
                first = doc.keys[path + (key,)]
                problems.append(
                    Diagnostic(
                        doc.file, *_xy(key_node), "FC004",
                        f'duplicate key "{key}" (first defined at line {first.line})',
                        json_path=json_pointer(path + (key,)),
                    )
                )
                continue
            doc.keys[path + (key,)] = _pos(key_node.start_mark)
            out[key] = _build(value_node, path + (key,), doc, loader, problems, budget, within)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_build(child, path + (i,), doc, loader, problems, budget, within) for i, child in enumerate(node.value)]
    return _construct(node, loader, doc, problems)


def _construct(node, loader, doc: YamlDocument, problems: list[Diagnostic]):
    """A scalar as JSON's types have it; a tag that cannot read it (`!!int abc`, `!foo`, a bare `=`) is a
    diagnostic at the scalar, and the scalar's text stands for it."""
    if not isinstance(node, yaml.ScalarNode):
        problems.append(Diagnostic(doc.file, *_xy(node), "FC003", "YAML key is a mapping or a list",
                                   expected="a key that is a plain name"))
        return yaml.serialize(node)[:40]
    try:
        value = loader.construct_object(node, deep=True)
    except (yaml.YAMLError, ValueError, OverflowError) as exc:
        reason = exc.problem if isinstance(exc, yaml.MarkedYAMLError) else str(exc).split(";")[0]
        problems.append(Diagnostic(doc.file, *_xy(node), "FC003", f"YAML value {node.value[:40]!r} cannot be read "
                                                                   f"as {node.tag.replace('tag:yaml.org,2002:', '!!')}: {reason}",
                                   expected="a plain value; tags such as !!int or !name are not needed"))
        return node.value
    # Dates and binary become strings: feedctl's formats are JSON's.
    if not isinstance(value, (str, int, float, bool, type(None))):
        value = node.value
    return value


def _xy(node) -> tuple[int, int]:
    """Where a node or an event starts."""
    return node.start_mark.line + 1, node.start_mark.column + 1

