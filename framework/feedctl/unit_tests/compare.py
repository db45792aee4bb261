"""A unit test's expected messages against those its feed emitted, and the difference as a reader wants it:
which message differs, and a diff of the two lists."""

from __future__ import annotations

import difflib
import json
from decimal import Decimal, InvalidOperation

from feedctl.unit_tests.harness import Emitted
from feedctl.unit_tests.spec import Expected
from feedctl.units import plural


def differences(expected: tuple[Expected, ...], emitted: list[Emitted]) -> list[str]:
    """Nothing when every message is as expected, in order; else what differs, and the diff."""
    first = next(
        (i for i, (e, m) in enumerate(zip(expected, emitted)) if not _matches(e, m)),
        None if len(expected) == len(emitted) else min(len(expected), len(emitted)),
    )
    if first is None:
        return []
    if first < min(len(expected), len(emitted)):
        e, m = expected[first], emitted[first]
        fields = [("key", e.key, m.key), ("after", e.after, m.after)] + (
            [("before", e.before, m.before)] if e.checks_before else []
        )
        said = f"message {first + 1} differs: " + next(
            _where(name, want, got) for name, want, got in fields if not _same(want, got)
        )
    elif len(emitted) < len(expected):
        n = len(expected) - len(emitted)
        said = f"{plural(n, 'expected message')} {'was' if n == 1 else 'were'} not emitted"
    else:
        n = len(emitted) - len(expected)
        said = f"{plural(n, 'message')} {'was' if n == 1 else 'were'} emitted that the test does not expect"
    # an expected value equal to the emitted one is shown as emitted: the diff shows what differs alone
    shown = [
        (_as(e.key, m.key), _as(e.after, m.after), _as(e.before, m.before))
        if m is not None
        else (e.key, e.after, e.before)
        for e, m in zip(expected, [*emitted, *[None] * len(expected)])
    ]
    want = [_text(k, a, b if e.checks_before else None, e.checks_before) for e, (k, a, b) in zip(expected, shown)]
    got = [_text(m.key, m.after, m.before, any(e.checks_before for e in expected)) for m in emitted]
    diff = difflib.unified_diff(want, got, "expected", "emitted", lineterm="", n=2)
    return [said, *list(diff)[2:]]


def _where(name: str, want, got) -> str:
    """The first place `want` and `got` differ: `after.status: expected 'paid', emitted 'new'`."""
    if isinstance(want, dict) and isinstance(got, dict):
        for k in [*want, *(k for k in got if k not in want)]:
            if k not in got:
                return f"{name}.{k}: expected {want[k]!r}, not emitted"
            if k not in want:
                return f"{name}.{k}: emitted {got[k]!r}, not expected"
            if not _same(want[k], got[k]):
                return _where(f"{name}.{k}", want[k], got[k])
    return f"{name}: expected {want!r}, emitted {got!r}"


def _as(want, got):
    """`want`, with what equals `got` as `got` writes it."""
    if _same(want, got):
        return got
    if isinstance(want, dict) and isinstance(got, dict):
        return {k: _as(v, got[k]) if k in got else v for k, v in want.items()}
    return want


def _matches(e: Expected, m: Emitted) -> bool:
    return _same(e.key, m.key) and _same(e.after, m.after) and (not e.checks_before or _same(e.before, m.before))


def _same(want, got) -> bool:
    """Equal values; a number as YAML writes it equal to the same number as a message writes it (a decimal
    as text, `50` as `50.00`)."""
    if isinstance(want, dict) and isinstance(got, dict):
        return set(want) == set(got) and all(_same(want[k], got[k]) for k in want)
    if isinstance(want, list) and isinstance(got, list):
        return len(want) == len(got) and all(_same(a, b) for a, b in zip(want, got))
    if want == got:
        return True
    if isinstance(want, bool) or isinstance(got, bool) or want is None or got is None:
        return False
    if isinstance(want, (int, float)) or isinstance(got, (int, float)):
        try:
            return Decimal(str(want)) == Decimal(str(got))
        except (InvalidOperation, ValueError):
            return False
    return str(want) == str(got)


def _text(key, after, before, with_before: bool) -> str:
    fields = {"key": key, "after": after, **({"before": before} if with_before else {})}
    return json.dumps(fields, sort_keys=True, default=str)
