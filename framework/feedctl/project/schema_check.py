"""Validate YAML documents against the JSON Schemas shipped in `schemas/`.

jsonschema's errors name a path and a keyword; this turns each into a diagnostic pointing at the line and
column of the offending key or value, with what was expected and the nearest valid spelling.
"""

from __future__ import annotations

import copy
import hashlib
import json
import marshal
import os
import re
import sys
from functools import cache
from importlib import resources

from feedctl.diagnostics import Diagnostic, did_you_mean, json_pointer
from feedctl.project.env_vars import SECRET_VALUES
from feedctl.project.secrets import scrub_text
from feedctl.project.yaml_source import YamlDocument

SCHEMA_FILES = ("defs", "project", "feeds", "sinks")
_KIND_CODES = {"duration": "FC107", "size": "FC108", "timestamp": "FC109"}
_KIND_EXPECTED = {
    "duration": "a duration such as 500ms, 10s, 1m30s or 2h",
    "size": "a size such as 1048576, 16MiB or 64MB",
    "locality": "key=value pairs separated by commas, e.g. region=us-east-1,zone=a",
}


def schema_text(name: str) -> str:
    return resources.files("feedctl.project").joinpath("schemas", f"{name}.schema.json").read_text()


@cache
def schema(name: str) -> dict:
    return json.loads(schema_text(name))


@cache
def validator(name: str):
    """jsonschema's validator, for a document the fast check rejected: imported then, not by every compile."""
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    registry = Registry().with_resources((f"{n}.schema.json", Resource.from_contents(schema(n))) for n in SCHEMA_FILES)
    return Draft202012Validator(schema(name), registry=registry)


def inlined(definition: dict) -> dict:
    """A schema with the shared definitions copied in, so that it stands alone."""
    definition = copy.deepcopy(definition)
    definition.setdefault("$defs", {}).update({f"shared_{k}": v for k, v in schema("defs")["$defs"].items()})

    def walk(node):
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("defs.schema.json#/$defs/"):
                node["$ref"] = "#/$defs/shared_" + ref.rsplit("/", 1)[1]
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(definition)
    definition.pop("$id", None)
    definition.pop("$schema", None)
    return definition


def fast_check(definition: dict):
    """A schema compiled to Python code: about 30 times faster than walking it, and it only says whether
    a document is valid. An invalid one is validated again by jsonschema, for precise diagnostics."""
    import fastjsonschema

    compiled = _compiled(definition)

    def valid(data) -> bool:
        try:
            compiled(data)
            return True
        except fastjsonschema.JsonSchemaException:
            return False

    return valid


def _compiled(definition: dict):
    """The schema's validator. Generating and compiling its code takes about as long as a whole warm compile
    of a large project (0.14 s for four schemas), so its bytecode is kept in the user's cache folder, under a
    hash of the schema, fastjsonschema's version and Python's, as Python keeps its own; where that folder
    cannot be written, it is made every time."""
    import fastjsonschema

    text = json.dumps(definition, sort_keys=True)
    key = f"{fastjsonschema.VERSION}\0{sys.implementation.cache_tag}\0{text}"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = os.path.join(base, "feedctl", "validators", hashlib.sha256(key.encode()).hexdigest()[:32] + ".bin")
    scope: dict = {}
    try:
        with open(path, "rb") as f:
            name, code = marshal.load(f)
        exec(code, scope)  # bytecode of what fastjsonschema generated from feedctl's own schema
        return scope[name]
    except Exception:  # none yet, or damaged: made again
        pass
    source = fastjsonschema.compile_to_code(definition)
    name = re.search(r"^def (\w+)\(data", source, re.MULTILINE).group(1)  # the schema's own function comes first
    code = compile(source, "<schema validator>", "exec")
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        temporary = f"{path}.{os.getpid()}"
        with open(temporary, "wb") as f:
            marshal.dump((name, code), f)
        os.replace(temporary, path)
    except OSError:
        pass
    exec(code, scope)
    return scope[name]


@cache
def _fast(name: str):
    return fast_check(inlined(schema(name)))


def is_valid(data, kind: str) -> bool:
    return _fast(kind)(data)


def check(doc: YamlDocument, kind: str) -> list[Diagnostic]:
    """All schema problems of one document, each with its position."""
    if is_valid(doc.data, kind):
        return []
    out: list[Diagnostic] = []
    for error in validator(kind).iter_errors(doc.data):
        out.extend(_diagnose(doc, error))
    return out


def _type_name(value) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}.get(
        type(value), type(value).__name__
    )


def _shown(value) -> str:
    """A value as a diagnostic quotes it: a secret redacted whole before it is shortened, which would leave
    its first characters for the redaction to miss."""
    text = json.dumps(value) if not isinstance(value, (dict, list)) else _type_name(value)
    text = scrub_text(text, SECRET_VALUES)
    return text if len(text) <= 60 else text[:57] + "..."


def _resolve(error_schema: dict) -> dict:
    """Follow one $ref into the shared definitions, for descriptions and annotations."""
    ref = error_schema.get("$ref", "")
    if ref.startswith("defs.schema.json#/$defs/"):
        merged = dict(schema("defs")["$defs"][ref.rsplit("/", 1)[1]])
        merged.update({k: v for k, v in error_schema.items() if k != "$ref"})
        return merged
    return error_schema


def _boolean_hint(expected: str, instance) -> str:
    """YAML 1.1's booleans are text in YAML 1.2, which the project's files are read as."""
    word = str(instance).lower() if isinstance(instance, str) else ""
    if "boolean" in expected and word in ("yes", "no", "on", "off", "y", "n"):
        value = "true" if word in ("yes", "on", "y") else "false"
        return f"write {value} (in YAML 1.2, {_shown(instance)} is text)"
    return ""


def _duration_hint(schemas: list, instance) -> str:
    """A bare number where a duration is expected: its unit is missing."""
    if (
        isinstance(instance, (int, float))
        and not isinstance(instance, bool)
        and any(_resolve(s).get("x-feedctl-kind") == "duration" for s in schemas if isinstance(s, dict))
    ):
        return f'did you mean "{instance}s"? a duration has a unit'
    return ""


def _diagnose(doc: YamlDocument, error) -> list[Diagnostic]:
    path = tuple(error.absolute_path)
    kw = error.validator
    instance = error.instance
    sub = error.schema if isinstance(error.schema, dict) else {}

    def at(p, code, message, expected="", hint="", key=False):
        # A mapping or list written as a block starts on the line after its key: point at the key instead.
        pos = doc.position(p, key=key or (p == path and isinstance(instance, (dict, list))))
        return Diagnostic(
            doc.file, pos.line, pos.column, code, message, json_path=json_pointer(p), expected=expected, hint=hint
        )

    if kw == "additionalProperties" and isinstance(instance, dict):
        known = list(sub.get("properties", {}))
        out = []
        for key in instance:
            if key in known:
                continue
            out.append(
                at(
                    path + (key,),
                    "FC101",
                    f'unknown key "{key}"',
                    expected="one of " + ", ".join(known),
                    hint=did_you_mean(key, known),
                    key=True,
                )
            )
        return out
    if kw == "required":
        missing = [k for k in error.validator_value if isinstance(instance, dict) and k not in instance]
        return [at(path, "FC102", f'missing required key "{k}"', expected=f'a "{k}" key') for k in missing]
    if kw == "type":
        expected = error.validator_value
        expected = " or ".join(expected) if isinstance(expected, list) else expected
        got = (
            _type_name(instance) if isinstance(instance, (dict, list)) else f"{_type_name(instance)} {_shown(instance)}"
        )
        return [
            at(
                path,
                "FC103",
                f"expected {expected}, got {got}",
                expected=expected,
                hint=_boolean_hint(expected, instance) or _duration_hint([sub], instance),
            )
        ]
    if kw == "enum":
        choices = error.validator_value
        return [
            at(
                path,
                "FC104",
                f"{_shown(instance)} is not a valid value",
                expected="one of " + ", ".join(map(str, choices)),
                hint=did_you_mean(instance, choices),
            )
        ]
    if kw == "const":
        return [
            at(path, "FC104", f"{_shown(instance)} is not a valid value", expected=json.dumps(error.validator_value))
        ]
    if kw == "pattern":
        kind = _resolve(sub).get("x-feedctl-kind", "")
        code = _KIND_CODES.get(kind, "FC105")
        expected = _KIND_EXPECTED.get(kind) or _resolve(sub).get(
            "description", f"text matching {error.validator_value}"
        )
        return [
            at(path, code, f"{_shown(instance)} is not {kind and 'a valid ' + kind or 'valid here'}", expected=expected)
        ]
    if kw in (
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minItems",
        "maxItems",
        "minLength",
        "maxLength",
    ):
        return [
            at(
                path,
                "FC106",
                f"{_shown(instance)} is out of range: {error.message}",
                expected=f"{kw} {error.validator_value}",
            )
        ]
    if kw == "uniqueItems":
        return [at(path, "FC104", "items must be unique", expected="no repeated items")]
    if kw in ("oneOf", "anyOf"):
        # Report the branch whose type fits the value: a malformed duration, not "is not valid under any".
        fitting = [e for e in error.context if e.validator not in ("type", "const")]
        if len({tuple(e.relative_schema_path)[:1] for e in fitting}) == 1:
            out = []
            for e in fitting:
                out.extend(_diagnose(doc, e))
            return out[:1]
        description = _resolve(sub).get("description", "")
        return [
            at(
                path,
                "FC103",
                f"{_shown(instance)} is not valid here",
                expected=description,
                hint=_duration_hint(sub.get(kw, []), instance),
            )
        ]
    return [at(path, "FC104", error.message)]
