"""Localities: ordered `key=value` tiers, as CockroachDB's `--locality` (`region=us-east1,zone=b`). A node
matches a filter (a span's home, an `execution_locality`) when it has every tier of it; how close two
localities are is the number of tiers they share in order from the first."""

from __future__ import annotations


def tiers(locality: str | None) -> list[tuple[str, str]]:
    return [tuple(t.split("=", 1)) for t in (locality or "").split(",") if "=" in t]


def matches(wanted: str, have: str | None) -> bool:
    """Whether `have` includes every tier of the filter `wanted`, in any order."""
    own = dict(tiers(have))
    return all(own.get(k) == v for k, v in tiers(wanted))


def shared(a: str | None, b: str | None) -> int:
    """Tiers in common from the first: `region=x,zone=y` and `region=x,zone=z` share 1; `region=x,zone=y`
    and `zone=y,region=x` share none."""
    n = 0
    for x, y in zip(tiers(a), tiers(b)):
        if x != y:
            break
        n += 1
    return n
