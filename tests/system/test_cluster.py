"""The same reads and writes on a real standalone Spark cluster: a master and two workers started from the
pyspark wheel, and a driver in its own process (a JVM can hold only one SparkContext)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest

pytestmark = pytest.mark.cluster
REPO = Path(__file__).resolve().parent.parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def standalone_cluster(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """A master and two workers (1 core, 1 GiB each) from the pyspark wheel: the master's URL and the
    environment a driver process needs. Skips the test when they do not come up."""
    spark_home = Path(pyspark.__file__).parent
    spark_class = spark_home / "bin" / "spark-class"
    env = dict(
        os.environ,
        SPARK_HOME=str(spark_home),
        SPARK_LOCAL_IP="127.0.0.1",
        PYSPARK_PYTHON=sys.executable,
        SPARK_WORKER_DIR=str(tmp_path / "work"),
        SPARK_LOG_DIR=str(tmp_path / "logs"),
    )
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    logs = {name: open(tmp_path / f"{name}.log", "w") for name in ("master", "worker1", "worker2")}
    procs = [
        subprocess.Popen(
            [
                str(spark_class),
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(_free_port()),
            ],
            env=env,
            stdout=logs["master"],
            stderr=subprocess.STDOUT,
        )
    ]
    try:
        if not _wait_for(lambda: "I have been elected leader" in (tmp_path / "master.log").read_text(), 60):
            pytest.skip(
                "the standalone Spark master did not start: " + (tmp_path / "master.log").read_text()[-500:]
            )
        for name in ("worker1", "worker2"):
            procs.append(
                subprocess.Popen(
                    [
                        str(spark_class),
                        "org.apache.spark.deploy.worker.Worker",
                        url,
                        "--cores",
                        "1",
                        "--memory",
                        "1g",
                        "--host",
                        "127.0.0.1",
                        "--webui-port",
                        str(_free_port()),
                    ],
                    env=env,
                    stdout=logs[name],
                    stderr=subprocess.STDOUT,
                )
            )
        registered = lambda: (tmp_path / "master.log").read_text().count("Registering worker") >= 2  # noqa: E731
        if not _wait_for(registered, 60):
            pytest.skip(
                "the standalone Spark workers did not register: "
                + (tmp_path / "master.log").read_text()[-500:]
            )
        yield url, env
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        for f in logs.values():
            f.close()


# One driver process on the cluster (a driver and its two executors cost tens of seconds to start):
# - Spark's own reads and writes of a local table: a write in four partitions and an append, a read of every row, a
#   filtered read, the change feed;
# - the differential test (tests/spark/test_refresh_differential.py) with every table on the object store, every batch
#   computed by Spark's executors (driver_max_changes = 0): they read the change feeds and tables and write through
#   delta-rs, with the storage options the data source passes them.
DRIVER = textwrap.dedent("""
    import json, random, sys
    from pathlib import Path
    from mvengine.project.catalog import load_catalog
    from mvengine.config import load_config
    from mvengine.runtime.refresh import Refresher
    from mvengine.runtime.session import spark_session
    from mvengine.storage.api import read_changes, read_table, write_table
    from mvengine.storage.tables import TableRef
    from tests.spark.test_refresh_differential import apply_commit, check_view
    from tests.system.test_refresh_crash import _random_commit

    project = Path(sys.argv[1])
    config = load_config(project)
    catalog = load_catalog(config)
    spark = spark_session(config)

    ref = TableRef(sys.argv[2], name="events")
    write_table(spark.range(0, 40000, numPartitions=4).selectExpr("id", "id % 10 as bucket"), ref)
    write_table(spark.range(40000, 40010).selectExpr("id", "id % 10 as bucket"), ref)
    df = read_table(spark, ref)
    pids = spark.sparkContext.parallelize(range(8), 8).map(lambda _: __import__("os").getpid()).distinct().count()
    report = {
        "worker_processes": pids,
        "partitions": df.rdd.getNumPartitions(),
        "count": df.count(),
        "filtered": df.where("id >= 39990 AND bucket = 3").count(),
        "changes": read_changes(spark, ref, 1).count(),
    }

    rng = random.Random(20261125)
    engines = set()
    refresher = Refresher(spark, config, catalog, report=lambda r: engines.add(f"{r.kind}/{r.engine}"))
    refresher.refresh()
    for i in range(3):
        apply_commit(spark, catalog, _random_commit(rng, i), config.storage_options)
    refresher.refresh()
    for name in catalog.plans:
        check_view(spark, catalog, name, config.storage_options)
    report.update(engines=sorted(engines),
                  executors=spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1)
    print(json.dumps(report))
    spark.stop()
""")


@pytest.mark.object_store
def test_reads_writes_and_the_differential_test_on_a_two_worker_cluster_and_the_object_store(
    object_store, tmp_path: Path
):
    from tests.conftest import write_project
    from tests.spark.test_refresh_differential import SOURCES
    from tests.system.test_refresh_crash import VIEWS

    folder = tmp_path / "cluster"
    folder.mkdir()
    with standalone_cluster(folder) as (url, env):
        conf = (
            object_store.conf(f"{object_store.bucket()}/wh")
            + f'\n[spark]\nmaster = "{url}"\nlog_level = "INFO"\n\n[spark.conf]\n"spark.driver.host" = "127.0.0.1"\n'
            '"spark.cores.max" = "2"\n"spark.executor.cores" = "1"\n\n[refresh]\ndriver_max_changes = 0\n'
        )
        project = write_project(tmp_path / "project", SOURCES, VIEWS, conf)
        result = subprocess.run(
            [sys.executable, "-c", DRIVER, str(project), str(tmp_path / "events")],
            env=dict(os.environ, **env),  # the store's keys were set after the cluster started
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=900,
        )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["executors"] == 2
    assert report["worker_processes"] >= 2
    assert report["partitions"] >= 2
    assert report["count"] == 40010
    assert report["filtered"] == 2  # ids 39993 and 40003
    assert report["changes"] == 10
    assert "stream/spark" in report["engines"], report  # the delta rules ran in Spark, on the executors
    # The keys reached the executors (they read and wrote the tables) but no log of the driver, the master,
    # the workers or the executors shows them.
    logs = [result.stdout, result.stderr] + [
        p.read_text(errors="replace")
        for p in tmp_path.rglob("*")
        if p.is_file() and p.suffix not in (".jar", ".zip")
    ]
    for key in (object_store.SECRET, object_store.KEY_ID):
        assert not [text for text in logs if key in text], f"{key} is in a log"


def _wait_for(condition, seconds: float) -> bool:
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            if condition():
                return True
        except FileNotFoundError:
            pass
        time.sleep(0.5)
    return False
