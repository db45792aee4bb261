"""The compiled validator (fast path) and jsonschema must agree on every document: a file the fast path
accepts is never one jsonschema would reject, or its errors would go unreported."""

from __future__ import annotations

import pytest

from feedctl.project.schema_check import is_valid, validator
from feedctl.project.yaml_source import parse_yaml
from support import FIXTURES


def _documents():
    for path in sorted(FIXTURES.rglob("*.y*ml")):
        if path.name in ("expected.yml", "tables.yml"):
            continue
        kind = (
            "project"
            if path.name == "project.yml"
            else path.parent.name
            if path.parent.name in ("feeds", "sinks")
            else None
        )
        try:
            path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # such a file stops at reading (FC002), before any validation
        if kind:
            yield pytest.param(path, kind, id=str(path.relative_to(FIXTURES)))


@pytest.mark.parametrize("path,kind", list(_documents()))
def test_fast_path_agrees_with_jsonschema(path, kind):
    doc, _ = parse_yaml(path.read_text(encoding="utf-8"), path.name)
    if doc is None or doc.data is None:
        return
    detailed = list(validator(kind).iter_errors(doc.data))
    assert is_valid(doc.data, kind) == (not detailed), [e.message for e in detailed]


def test_corpus_holds_documents_the_schemas_reject():
    verdicts = []
    for param in _documents():
        path, kind = param.values
        doc, _ = parse_yaml(path.read_text(encoding="utf-8"), path.name)
        if doc is not None and doc.data is not None:
            verdicts.append(is_valid(doc.data, kind))
    assert verdicts.count(False) >= 30 and verdicts.count(True) >= 30
