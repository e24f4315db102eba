"""The same reads and writes on a real standalone Spark cluster: a master and two workers started from the
pyspark wheel, and a driver in its own process (a JVM can hold only one SparkContext)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import pyspark

pytestmark = pytest.mark.cluster

DRIVER = textwrap.dedent("""
    import json, socket, sys
    from mvengine.runtime.session import spark_session
    from mvengine.storage.api import read_changes, read_table, write_table
    from mvengine.storage.tables import TableRef

    spark = spark_session(master=sys.argv[1], conf={"spark.driver.host": "127.0.0.1",
                                                   "spark.cores.max": "2", "spark.executor.cores": "1"})
    ref = TableRef(sys.argv[2], name="events")
    write_table(spark.range(0, 40000, numPartitions=4).selectExpr("id", "id % 10 as bucket"), ref)
    write_table(spark.range(40000, 40010).selectExpr("id", "id % 10 as bucket"), ref)
    df = read_table(spark, ref)
    hosts = spark.sparkContext.parallelize(range(8), 8).map(lambda _: __import__("os").getpid()).distinct().count()
    print(json.dumps({
        "executors": spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1,
        "worker_processes": hosts,
        "partitions": df.rdd.getNumPartitions(),
        "count": df.count(),
        "filtered": df.where("id >= 39990 AND bucket = 3").count(),
        "changes": read_changes(spark, ref, 1).count(),
    }))
    spark.stop()
""")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_reads_and_writes_on_a_two_worker_standalone_cluster(tmp_path: Path):
    spark_home = Path(pyspark.__file__).parent
    spark_class = spark_home / "bin" / "spark-class"
    env = dict(os.environ, SPARK_HOME=str(spark_home), SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               SPARK_WORKER_DIR=str(tmp_path / "work"), SPARK_LOG_DIR=str(tmp_path / "logs"))
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    logs = {name: open(tmp_path / f"{name}.log", "w") for name in ("master", "worker1", "worker2")}
    procs = [subprocess.Popen([str(spark_class), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(port), "--webui-port", str(_free_port())],
                              env=env, stdout=logs["master"], stderr=subprocess.STDOUT)]
    try:
        if not _wait_for(lambda: "I have been elected leader" in (tmp_path / "master.log").read_text(), 60):
            pytest.skip("the standalone Spark master did not start: " + (tmp_path / "master.log").read_text()[-500:])
        for name in ("worker1", "worker2"):
            procs.append(subprocess.Popen(
                [str(spark_class), "org.apache.spark.deploy.worker.Worker", url, "--cores", "1", "--memory", "1g",
                 "--host", "127.0.0.1", "--webui-port", str(_free_port())],
                env=env, stdout=logs[name], stderr=subprocess.STDOUT))
        registered = lambda: (tmp_path / "master.log").read_text().count("Registering worker") >= 2  # noqa: E731
        if not _wait_for(registered, 60):
            pytest.skip("the standalone Spark workers did not register: "
                        + (tmp_path / "master.log").read_text()[-500:])
        result = subprocess.run([sys.executable, "-c", DRIVER, url, str(tmp_path / "events")], env=env,
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr[-3000:]
        report = json.loads(result.stdout.strip().splitlines()[-1])
        assert report["executors"] == 2
        assert report["worker_processes"] >= 2
        assert report["partitions"] >= 2
        assert report["count"] == 40010
        assert report["filtered"] == 2  # ids 39993 and 40003
        assert report["changes"] == 10
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
