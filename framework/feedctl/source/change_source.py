"""Where a table's changes come from, version by version (`changes:` of a table in project.yml).

- `cdf`: the change data feed. A version written with it off is an error, as the feed cannot be followed
  there.
- `log`: the Delta log. The rows of the files a version added are inserts, those of the files it removed
  deletes, a file's new deletion vector deletes the rows it adds; the tasks pair a key's delete and insert of
  one version into an update, and drop it when the row came out as it was (a file rewritten around other
  rows). Change data files are not read.
- `auto` (the default): the change data files of a version that has them, the log otherwise: a table whose
  change data feed was turned on late is followed from before that version too.

A version without change data files is read from the log in every mode: appends, whole files removed and
deletion vectors are their own changes, with the change data feed on or off.
"""

from __future__ import annotations

from enum import Enum


class ChangeSource(str, Enum):
    CDF = "cdf"
    LOG = "log"
    AUTO = "auto"

    def __str__(self) -> str:
        return self.value


class VersionRead(Enum):
    CHANGE_FILES = "change data files"
    FILE_ACTIONS = "the files the version added and removed"


class ChangeDataOff(Exception):
    """A version whose change data cannot be read: the table's change data feed was off."""


def change_data_on(configuration: dict) -> bool:
    """Whether a table's properties turn its change data feed on."""
    return configuration.get("delta.enableChangeDataFeed", "false").lower() == "true"


def version_read(source: ChangeSource, version: int, enabled: bool, has_change_files: bool) -> VersionRead:
    """How `version` is read: `enabled` says whether the change data feed is on for it, `has_change_files`
    whether its commit wrote change data files."""
    if source == ChangeSource.CDF and not enabled:
        raise ChangeDataOff(
            f"the change data feed is off at version {version}; set delta.enableChangeDataFeed=true "
            "(changes before that cannot be read from it), or read them from the log (`changes: log` or "
            "`auto`)"
        )
    if has_change_files and source != ChangeSource.LOG:
        return VersionRead.CHANGE_FILES
    return VersionRead.FILE_ACTIONS
