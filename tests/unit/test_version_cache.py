"""A node's kept versions: a range put together from versions kept and versions read now is what reading the
range gives, and only the versions missing are read."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from feedctl.source.delta import DeltaSource
from feedctl.source.version_cache import VersionCache
from support import write_delta


@pytest.fixture
def source(tmp_path):
    path = write_delta(tmp_path / "t", {"id": "int64", "v": "string"}, [{"id": i, "v": "a"} for i in range(3)])
    for n in range(1, 6):  # versions 1..5: an insert, an update, a delete, in turn
        if n % 3 == 1:
            write_deltalake(str(path), pa.table({"id": [10 + n], "v": ["new"]}), mode="append")
        elif n % 3 == 2:
            DeltaTable(str(path)).update(predicate=f"id = {n // 2}", new_values={"v": f"'u{n}'"})
        else:
            DeltaTable(str(path)).delete("id = 0")
    assert DeltaTable(str(path)).version() == 5
    return DeltaSource("s.t", str(path))


def _read(cache: VersionCache, source, after: int, up_to: int, **kw) -> tuple[list[dict], int | None]:
    """The range's rows, and how many were read from Delta (None: all, without the cache)."""
    reader, tally = cache.changes(source, after, up_to, None, None, ["id"], kw.get("rows", 10))
    rows = reader.read_all().to_pylist()
    if tally is not None:
        assert tally.rows == len(rows)
    return rows, tally.read if tally is not None else None


def _direct(source, after: int, up_to: int) -> list[dict]:
    return source.changes(after, up_to, None, None, ["id"]).read_all().to_pylist()


def test_a_range_is_its_kept_versions_and_those_read_now(source):
    cache = VersionCache()
    rows, read = _read(cache, source, 0, 3)
    assert rows == _direct(source, 0, 3) and read == len(rows) > 0
    # versions 2 and 3 kept, 4 and 5 read
    rows, read = _read(cache, source, 1, 5)
    assert rows == _direct(source, 1, 5)
    assert read == len(_direct(source, 3, 5))
    rows, read = _read(cache, source, 2, 4)
    assert rows == _direct(source, 2, 4) and read == 0


def test_what_is_kept_is_bounded_and_a_large_range_is_read_as_always(source):
    cache = VersionCache(max_bytes=1)  # nothing fits: every range read again, and still right
    assert _read(cache, source, 0, 5)[0] == _direct(source, 0, 5)
    assert _read(cache, source, 0, 5)[1] == len(_direct(source, 0, 5))
    large = VersionCache(max_rows=5)
    rows, read = _read(large, source, 0, 5, rows=6)  # said large by its commits: read as always
    assert rows == _direct(source, 0, 5) and read is None
    every = len(_direct(source, 0, 5))
    assert every > 5
    # said small and found larger while read: streamed on, kept by nobody
    assert _read(large, source, 0, 5, rows=5) == (_direct(source, 0, 5), every)
    assert _read(large, source, 0, 5, rows=5)[1] == every


def test_versions_read_another_way_are_not_taken(source):
    cache = VersionCache()
    _read(cache, source, 0, 5)
    reader, tally = cache.changes(source, 0, 5, ["id"], None, ["id"], 10)  # other columns: read again
    assert reader.read_all().num_rows == tally.read > 0
