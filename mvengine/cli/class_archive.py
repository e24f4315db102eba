"""Build the class-data-sharing archive Spark's driver JVM starts from (`python -m mvengine.cli.class_archive`,
run by `make setup`, `make run` and `make test`).

A JVM reads, verifies and links each class it loads from its jar; Spark with Delta loads about 20,000 before its
first answer. Java's application class-data sharing (JEP 350) dumps the classes one run loaded into an archive that
later runs map from one file. Measured on 2 cores: the example project's `mv query` 12.9 s → 10.8 s (medians of 3),
a bare SparkSession's start 8 s → 5 s and its first job 3.5 s → 1.7 s. The archive is made by one run of a small
project through mvengine's own commands (sources, load, a bootstrap, a batch computed by Spark, query, changes), so
the classes of those paths are in it.

Its file name carries a digest of the Java, PySpark and Delta jars it was made with (session.class_archive), so a
change of any of them is a new name; a start without the file, or whose JVM refuses it, is a start as before."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DUMP_SECONDS = 300  # a JVM writes its archive as it exits: ~10 s on 2 cores


def build(archive: str) -> str:
    """Make `archive` unless it exists; says what it did. Archives of other names in its folder are removed (they
    belong to a Java, PySpark or jars no longer there)."""
    folder = Path(archive).parent
    if os.path.exists(archive):
        return f"the class archive is there: {archive}"
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("spark-classes-*.jsa*"):
        old.unlink()
    partial = f"{archive}.partial"
    with tempfile.TemporaryDirectory(prefix="mvengine-class-archive-") as work:
        pid_file = os.path.join(work, "jvm.pid")
        log = os.path.join(work, "run.log")
        with open(log, "wb") as out:
            run = subprocess.run(
                [sys.executable, "-m", "mvengine.cli.class_archive", "--run", work, partial, pid_file],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        if run.returncode != 0 or not os.path.exists(pid_file):
            raise SystemExit(f"Error: the run that makes the class archive failed:\n{Path(log).read_text()}")
        _wait_for_exit(int(Path(pid_file).read_text()))
    if not os.path.exists(partial) or os.path.getsize(partial) == 0:
        raise SystemExit("Error: Spark's JVM exited without writing the class archive")
    os.replace(partial, archive)
    return f"built the class archive {archive} ({os.path.getsize(archive) // 2**20} MiB)"


def _wait_for_exit(pid: int) -> None:
    """The JVM outlives the Python that drove it by the time it takes to write the archive."""
    deadline = time.monotonic() + DUMP_SECONDS
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    raise SystemExit(f"Error: Spark's JVM (pid {pid}) did not exit within {DUMP_SECONDS} s of its run")


def _run(folder: str, partial: str, pid_file: str) -> None:
    """The run whose classes go into the archive: the `mv init` project, its batches computed by Spark."""
    from mvengine.cli.main import main
    from mvengine.runtime.session import driver_java_options, spark_session
    from mvengine.scaffold import init_project

    spark = spark_session(
        conf={"spark.driver.extraJavaOptions": f"{driver_java_options()} -XX:ArchiveClassesAtExit={partial}"}
    )
    project = os.path.join(folder, "project")
    init_project(project)
    conf = Path(project, "conf", "mvengine.toml")
    conf.write_text(conf.read_text().replace("# driver_max_changes = 2000000", "driver_max_changes = 0"))
    Path(project, "data", "more.csv").write_text(
        "order_id,customer,amount,placed\n2,bob,8.00,2026-11-25 10:00:00\n4,cyd,1.00,2026-11-25 10:01:00\n"
    )
    steps = [
        ["sources", "--create"],
        ["load", "orders", os.path.join(project, "data", "orders.csv")],
        ["refresh"],
        ["load", "orders", os.path.join(project, "data", "more.csv"), "--upsert"],
        ["refresh"],
        ["query", "SELECT * FROM customer_totals VERSION AS OF 1"],
        ["changes", "customer_totals"],
    ]
    for step in steps:
        if main(["--project", project, *step]) != 0:
            raise SystemExit(f"`mv {' '.join(step)}` failed")
    jvm = spark._jvm
    assert jvm is not None
    Path(pid_file).write_text(str(jvm.java.lang.ProcessHandle.current().pid()))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--run"]:
        _run(*sys.argv[2:5])
    else:
        from mvengine.runtime.session import class_archive, java_version

        if java_version() is None:
            raise SystemExit("Error: no Java was found; the class archive is made with the Java Spark starts")
        print(build(class_archive()))
