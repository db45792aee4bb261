"""Reference pages read off JSON Schemas: every key of a file users write (or feedctl writes), with its type,
allowed values, default and description, as the schema says it. The schemas are what compile checks files
against, so a page built from them cannot describe a key compile would refuse."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources


def schema(package: str, name: str) -> dict:
    return json.loads(resources.files(package).joinpath(name).read_text(encoding="utf-8"))


def user_schema(name: str) -> dict:
    """One of the schemas of the files users write (`project`, `feeds`, `sinks`, `defs`)."""
    return schema("feedctl.project", f"schemas/{name}.schema.json")


@dataclass(frozen=True)
class Key:
    """A key of a document, at a path such as `sources[].tables[].path`."""

    path: str
    node: dict  # its schema, references followed
    kind: str  # what a value looks like, in words
    required: bool

    @property
    def name(self) -> str:
        return self.path.rsplit(".", 1)[-1]

    @property
    def anchor(self) -> str:
        return self.path.replace("[]", "").replace(".", "-")

    @property
    def description(self) -> str:
        return " ".join(self.node.get("description", "").split())


class Schemas:
    """Follows `$ref`s within one schema and into `defs.schema.json`."""

    def __init__(self, root: dict, defs: dict | None = None):
        self.root, self.defs = root, defs if defs is not None else user_schema("defs")

    def follow(self, node: dict) -> tuple[dict, str]:
        """The node a `$ref` names (its own keys, such as a description, kept over the target's), and the
        name of the definition it came from ("" for none)."""
        ref = node.get("$ref")
        if not ref:
            return node, ""
        document, _, pointer = ref.partition("#")
        target = self.defs if document == "defs.schema.json" else self.root
        for part in pointer.strip("/").split("/"):
            target = target[part]
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return self.follow(merged)[0], pointer.rsplit("/", 1)[-1]

    def kind(self, node: dict) -> str:
        node, defined = self.follow(node)
        if defined in ("duration", "size", "locality", "name", "string_map"):
            return {"string_map": "map of strings"}.get(defined, defined)
        if "const" in node:
            return f"`{json.dumps(node['const'])}`"
        if "enum" in node:
            return "one of " + ", ".join(f"`{v}`" for v in node["enum"])
        for key in ("oneOf", "anyOf"):
            if key in node:
                return " or ".join(self.kind(option) for option in node[key])
        kind = node.get("type", "any")
        if isinstance(kind, list):
            return " or ".join(kind)
        if kind == "array" and "items" in node:
            return f"list of {self.kind(node['items'])}"
        bounds = [
            f"≥ {node['minimum']}" if "minimum" in node else "",
            f"≤ {node['maximum']}" if "maximum" in node else "",
        ]
        return " ".join([kind, *filter(None, bounds)])

    def keys(self, node: dict, prefix: str = "") -> Iterator[Key]:
        """Every key under `node`, depth first, lists' items as `[]`."""
        node, _ = self.follow(node)
        required = set(node.get("required", ()))
        for name, child in node.get("properties", {}).items():
            path = f"{prefix}.{name}" if prefix else name
            followed, _ = self.follow(child)
            yield Key(path, followed, self.kind(child), name in required)
            yield from self._below(followed, path)

    def _below(self, node: dict, path: str) -> Iterator[Key]:
        if "properties" in node:
            yield from self.keys(node, path)
        items = node.get("items")
        if isinstance(items, dict):
            followed, _ = self.follow(items)
            if "properties" in followed:
                yield from self.keys(followed, f"{path}[]")


def prose(text: str) -> str:
    """Text from the code (a help text, a schema's description) as Markdown shows it: `<tag>` outside code
    spans is text, not an HTML tag."""
    parts = str(text).split("`")
    return "`".join(p if i % 2 else p.replace("<", "&lt;").replace(">", "&gt;") for i, p in enumerate(parts))


def cell(text: str) -> str:
    """Text safe in a Markdown table's cell."""
    return prose(" ".join(str(text).split())).replace("|", "\\|")


def default_text(value) -> str:
    if value is None or value == [] or value == {} or value == "":
        return "none"
    return f"`{json.dumps(value) if not isinstance(value, str) else value}`"


def key_section(key: Key, default=None, extra: tuple[str, ...] = (), anchor: str = "") -> str:
    """A key as a heading of its own (so it has an anchor to link to) and its facts."""
    lines = [f"### `{key.path}` {{#{anchor or key.anchor}}}", "", prose(key.description), ""]
    facts = [f"**Type**: {key.kind}"]
    if key.required:
        facts.append("**Required**")
    if default is not None:
        facts.append(f"**Default**: {default}")
    lines += ["; ".join(facts) + ".", ""]
    lines += [*(f"{line}\n" for line in extra)]
    return "\n".join(lines)
