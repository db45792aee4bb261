"""A node looks at each table's newest version every poll interval (`node/watch.py`): on this host's file system,
a table with nothing new is answered from its log's folder without delta-rs's refresh. What it answers is what
the log holds: new commits, one or several; a table removed or replaced."""

from __future__ import annotations

import re
import shutil

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from feedctl.source.delta import DeltaSource, SourceError
from support import corpus


def _commit(path, i: int, mode: str = "append") -> None:
    write_deltalake(str(path), pa.table({"id": pa.array([i], pa.int64())}), mode=mode)


def test_the_newest_version_follows_the_commits_one_or_several_at_a_time(tmp_path):
    path = tmp_path / "t"
    _commit(path, 0)
    source = DeltaSource("shop.t", str(path))
    assert source.newest_version(None) == 0
    assert source.newest_version(0) == 0
    _commit(path, 1)
    assert source.newest_version(0) == 1
    for i in range(2, 5):
        _commit(path, i)
    assert source.newest_version(1) == 4  # the newest, not the next
    assert source.newest_version(4) == 4


def test_a_table_removed_or_replaced_under_the_look_is_found(tmp_path):
    path = tmp_path / "t"
    for i in range(4):
        _commit(path, i)
    source = DeltaSource("shop.t", str(path))
    assert source.newest_version(None) == 3
    shutil.rmtree(path)
    _commit(path, 9)  # a new table where the old one was: its history begins again
    assert source.newest_version(3) == 0
    shutil.rmtree(path)
    with pytest.raises(SourceError, match=r"table shop\.t .*cannot be opened"):
        source.newest_version(0)


def test_the_newest_version_of_every_corpus_table_is_its_log_s_newest_commit(tmp_path):
    """The oracle is the log's folder itself: the highest version a commit or a checkpoint file there names
    (one table of the corpus keeps only its newest checkpoint)."""
    for name in corpus.tables():
        log = corpus.require() / name / "_delta_log"
        newest = max(int(m.group(1)) for f in log.iterdir() if (m := re.match(r"(\d{20})\.(json|checkpoint)", f.name)))
        source = DeltaSource(name, str(corpus.require() / name))
        assert source.newest_version(newest) == newest, name
        if newest > 0 and (log / f"{newest - 1:020d}.json").exists():
            assert source.newest_version(newest - 1) == newest, name  # delta-rs looks
