"""The driver JVM's options: the quick compiler alone unless a feed runs a CDC query, the project's own
options winning."""

from __future__ import annotations

from feedctl.spark.session import QUICK_JIT, java_options


def options(conf: dict, queries: bool) -> list[str]:
    return java_options(conf, queries).get("spark.driver.extraJavaOptions", "").split()


def test_quick_compiler_only_without_cdc_queries():
    assert QUICK_JIT in options({}, queries=False)
    assert QUICK_JIT not in options({}, queries=True)


def test_the_projects_java_options_come_last_and_win():
    mine = options({"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=4 -Xss4m"}, queries=False)
    assert mine.index(QUICK_JIT) < mine.index("-XX:TieredStopAtLevel=4")
    assert "-Xss4m" in mine
