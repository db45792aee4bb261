"""What reading a table's changes costs, judged from its newest versions: `feedctl plan` says it for every
table its feeds follow.

A version read from change data files reads those files. A version read from the log reads the files it
added and, when it also removed some (an `UPDATE`, `DELETE` or `MERGE` without change data, an overwrite),
the files it removed, whole: a version that rewrote N bytes reads those N bytes and the files it wrote.
"""

from __future__ import annotations

from dataclasses import dataclass

from feedctl.source.change_source import ChangeDataOff, ChangeSource, VersionRead, change_data_on, version_read
from feedctl.source.delta import DeltaSource
from feedctl.units import size_text

LOOKED_AT = 100  # the newest versions looked at


@dataclass(frozen=True)
class ChangeCost:
    table: str
    changes: ChangeSource
    change_data_feed: bool  # on at the newest version
    first: int  # the versions looked at
    last: int
    from_change_files: int  # versions read from change data files...
    change_file_bytes: int  # ...and what they read
    from_log: int  # versions read from the log...
    rewrites: int  # ...of which rewrote files...
    log_bytes: int  # ...and what they read: the files they added and removed
    unreadable: int  # versions `changes: cdf` cannot read (its change data feed off)

    def describe(self) -> str:
        """`s.t: changes auto, change data feed off; of versions 3..102, 100 from the log (1.2 GiB; 10
        rewrote files, read whole)`."""
        said = f"{self.table}: changes {self.changes}, change data feed {'on' if self.change_data_feed else 'off'}"
        if self.last < self.first:
            return f"{said}; no version after version 0 yet"
        parts = []
        if self.from_change_files:
            parts.append(f"{self.from_change_files} from change data files ({size_text(self.change_file_bytes)})")
        if self.from_log:
            rewrote = f"; {self.rewrites} rewrote files, read whole" if self.rewrites else ""
            parts.append(f"{self.from_log} from the log ({size_text(self.log_bytes)}{rewrote})")
        if self.unreadable:
            parts.append(f"{self.unreadable} cannot be read (change data feed off)")
        return f"{said}; of versions {self.first}..{self.last}, " + ", ".join(parts)


def change_cost(source: DeltaSource, looked_at: int = LOOKED_AT) -> ChangeCost:
    """The cost of reading the changes of the table's newest versions (`looked_at` of them at most)."""
    latest = source.latest_version()
    first = max(1, latest - looked_at + 1)
    log, changes = source.reader().log, source.change_source
    enabled = source.change_data_on(first - 1 if latest > 0 else latest)
    counts = {"files": 0, "file_bytes": 0, "log": 0, "rewrites": 0, "log_bytes": 0, "unreadable": 0}
    for version in range(first, latest + 1):
        commit = log.commit(version)
        if commit.configuration is not None:
            enabled = change_data_on(commit.configuration)
        try:
            how = version_read(changes, version, enabled, bool(commit.cdc))
        except ChangeDataOff:
            counts["unreadable"] += 1
            continue
        if how == VersionRead.CHANGE_FILES:
            counts["files"] += 1
            counts["file_bytes"] += sum(f.size for f in commit.cdc)
            continue
        counts["log"] += 1
        counts["rewrites"] += commit.rewrites
        # a remove action may leave out its size: such a file is counted as nothing
        counts["log_bytes"] += sum(f.size for f in [*commit.adds, *commit.removes] if f.data_change)
    return ChangeCost(
        source.name,
        changes,
        enabled,
        first,
        latest,
        counts["files"],
        counts["file_bytes"],
        counts["log"],
        counts["rewrites"],
        counts["log_bytes"],
        counts["unreadable"],
    )
