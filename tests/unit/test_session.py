"""The driver JVM's options: the quick compiler alone on a --follow node or unless a feed runs a CDC query,
the project's own options winning."""

from __future__ import annotations

from feedctl.spark.session import QUICK_JIT, java_options, quick_compiler


def options(conf: dict, quick: bool) -> list[str]:
    return java_options(conf, quick).get("spark.driver.extraJavaOptions", "").split()


def test_quick_compiler_on_follow_nodes_and_without_cdc_queries():
    assert quick_compiler(queries=False, follow=False)
    assert quick_compiler(queries=True, follow=True)
    assert not quick_compiler(queries=True, follow=False)  # a catch-up through a CDC query keeps C2
    assert QUICK_JIT in options({}, quick=True)
    assert QUICK_JIT not in options({}, quick=False)


def test_the_projects_java_options_come_last_and_win():
    mine = options({"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=4 -Xss4m"}, quick=True)
    assert mine.index(QUICK_JIT) < mine.index("-XX:TieredStopAtLevel=4")
    assert "-Xss4m" in mine
