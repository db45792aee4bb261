"""A class-data archive for the driver JVM: Spark's classes, loaded and verified once, mapped at every start.

Loading and verifying some ten thousand classes is most of the seconds a `feedctl run` spends before its
first batch; an archive written by a short training batch (`make install` runs
`python -m feedctl.spark.class_archive`) takes about a third of that away. It belongs to one JDK and
one Spark: its name says which, so another JDK or Spark simply finds none and starts as before.

    python -m feedctl.spark.class_archive   # (re)write the archive of this environment
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path


@functools.cache
def _java_build() -> str | None:
    java = Path(os.environ["JAVA_HOME"]) / "bin" / "java" if os.environ.get("JAVA_HOME") else shutil.which("java")
    if not java:
        return None
    try:
        out = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.SubprocessError):
        return None
    # `OpenJDK Runtime Environment (build 17.0.15+6-Debian-1deb12u1)`
    builds = [line.rsplit("(build ", 1)[1].rstrip(")") for line in out.splitlines() if "(build " in line]
    return builds[0] if builds else None


def path() -> Path | None:
    """Where this environment's archive lives (inside the virtual environment, beside Spark's jars)."""
    import pyspark

    build = _java_build()
    if build is None:
        return None
    safe = "".join(c if c.isalnum() or c in ".-" else "_" for c in build)
    return Path(sys.prefix) / "share" / "feedctl" / f"spark-{pyspark.__version__}-java-{safe}.jsa"


def java_options() -> str:
    """Driver JVM options that map the archive, or nothing when there is none."""
    archive = path()
    if archive is None or not archive.is_file():
        return ""
    # A stale archive (a JDK updated in place) is refused by the JVM itself; keep its warning off stdout.
    return f"-XX:SharedArchiveFile={archive} -Xlog:cds=off -Xlog:cds+dynamic=off"


def with_archive(conf: dict[str, str]) -> dict[str, str]:
    """`conf` with the archive added to the driver's Java options, unless the project manages CDS itself."""
    options = conf.get("spark.driver.extraJavaOptions", "")
    ours = java_options()
    if not ours or "SharedArchiveFile" in options or "ArchiveClassesAtExit" in options or "-Xshare" in options:
        return conf
    return {**conf, "spark.driver.extraJavaOptions": f"{options} {ours}".strip()}


def build() -> Path | None:
    """Write this environment's archive; returns its path (None without a JDK)."""
    archive = path()
    if archive is None:
        return None
    archive.parent.mkdir(parents=True, exist_ok=True)
    temporary = archive.with_suffix(f".{os.getpid()}.tmp")
    env = {**os.environ, "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            f"from feedctl.spark.training import train; from pathlib import Path; train(Path({str(temporary)!r}))",
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0 or not temporary.is_file():
        temporary.unlink(missing_ok=True)
        raise RuntimeError(f"the training batch wrote no class archive:\n{done.stderr[-3000:]}")
    temporary.replace(archive)  # whole or not at all: a concurrent start maps either none or this one
    return archive


if __name__ == "__main__":
    written = build()  # an error exits non-zero with the training batch's output
    print(f"class archive: {written}" if written else "class archive: no JDK found, none written")
