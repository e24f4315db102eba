"""The session's Python workers: the project's interpreter, importing pyspark from site-packages (not from the
zip Spark prepends to their path, which they would compile from source at every start)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pyspark

from mvengine.runtime.session import worker_python

LAUNCHER = Path(sys.executable).parent / "mvengine-worker-python"


def test_the_launcher_drops_only_the_installed_pyspark_from_the_path(tmp_path: Path):
    bundled = Path(sysconfig.get_paths()["purelib"]) / "pyspark"
    path = os.pathsep.join([str(bundled / "python" / "lib" / "pyspark.zip"), str(tmp_path / "mine"),
                            str(bundled / "jars" / "spark-core.jar"), str(tmp_path / "other.zip")])
    out = subprocess.run([str(LAUNCHER), "-c", "import json, os, sys; print(json.dumps([os.environ['PYTHONPATH'],"
                          " sys.executable, sys.argv[1:]]))", "a", "-b"],
                         env=dict(os.environ, PYTHONPATH=path), capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [os.pathsep.join([str(tmp_path / "mine"), str(tmp_path / "other.zip")]),
                                      sys.executable, ["a", "-b"]]


def test_workers_run_the_launcher_and_import_the_installed_pyspark(spark):
    assert worker_python() == str(LAUNCHER)
    assert os.environ["PYSPARK_PYTHON"] == str(LAUNCHER)
    where = spark.sparkContext.parallelize([0], 1).map(lambda _: __import__("pyspark").__file__).collect()
    assert where == [pyspark.__file__]
