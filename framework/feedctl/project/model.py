"""The loaded project: sources and tables, sinks, feeds and macros, each remembering where it was defined."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from feedctl.spark.place import SparkPlace


@dataclass(frozen=True)
class Origin:
    """Where a definition starts: the position of its `name`."""

    file: str  # relative to the project root
    line: int
    column: int


@dataclass
class TableDef:
    source: str
    name: str
    path: str  # as written (rendered); see `location`
    location: str  # absolute local path or URI, as the Delta reader takes it
    primary_key: list[str]
    origin: Origin
    json_path: tuple = ()
    path_display: str = ""  # `path`, secrets redacted
    location_display: str = ""  # `location`, secrets redacted
    description: str = ""
    locality: str | None = None
    region_column: str | None = None
    spans: int | None = None
    changes: str = "auto"  # where its changes come from: cdf | log | auto (`source/change_source.py`)
    storage_options: dict[str, str] = field(default_factory=dict)
    storage_options_display: dict[str, str] = field(default_factory=dict)  # secrets redacted
    column_origins: dict[str, Origin] = field(default_factory=dict)  # where each key/region column is named

    @property
    def fqn(self) -> str:
        return f"{self.source}.{self.name}"


@dataclass
class SinkDef:
    name: str
    uri: str
    uri_display: str  # secrets redacted
    kind: str | None  # cloudstorage | kafka | webhook | null; None when the scheme is unknown
    scheme: str
    options: dict
    options_display: dict
    origin: Origin
    json_path: tuple = ()
    description: str = ""


@dataclass
class FeedDef:
    name: str
    origin: Origin
    json_path: tuple = ()
    description: str = ""
    tags: list[str] = field(default_factory=list)
    query_file: str | None = None  # project-relative path of the CDC query
    tables: list[str] = field(default_factory=list)  # declared `tables:`; a query's table comes from compiling it
    sink: str | None = None
    options: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)
    options_valid: bool = True  # False when the options broke the schema: combination rules are then skipped
    contract_enforced: bool = False  # `contract: {enforced: true}`: plan's breaking-change gate holds it
    version: int = 1  # its output contract's version


@dataclass
class Project:
    root: Path
    name: str
    state_url: str
    state_url_display: str
    spark: SparkPlace
    vars: dict
    staging: str = "target/stage"  # as written: a path, or a URL every executor reaches
    staging_location: str = ""  # an absolute local path, or that URL
    vars_display: dict = field(default_factory=dict)  # values from env_var() redacted
    spark_conf_display: dict = field(default_factory=dict)  # values from env_var(), or under secret names, redacted
    spark_master_display: str = ""
    spark_remote_display: str = ""  # its parameters (the token) redacted
    settings: dict = field(default_factory=dict)  # project-wide defaults (`settings:`)
    metrics: dict = field(default_factory=dict)  # where --follow nodes serve Prometheus metrics (`metrics:`)
    tables: dict[str, TableDef] = field(default_factory=dict)
    sinks: dict[str, SinkDef] = field(default_factory=dict)
    feeds: dict[str, FeedDef] = field(default_factory=dict)
    macro_files: list[str] = field(default_factory=list)
    description: str = ""
