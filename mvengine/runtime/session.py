"""The one place a SparkSession is made: config from conf/mvengine.toml, sane local defaults, the project's
Python for the workers, Delta Lake's own Spark connector when its jars are there, and mvengine's Delta data
source registered.

Delta's connector comes from the project's `jars/` folder (filled by `make jars` from pom.xml, never at run time)
or from the folder `MVENGINE_JARS` names, and is loaded with `spark.jars`. A Spark that brings Delta its own way
(a cluster's `spark.jars.packages`, Databricks) is used as it is: `has_native_delta` (storage/api.py) asks the
session whether the `delta` format is there."""

from __future__ import annotations

import functools
import gc
import glob
import hashlib
import logging
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from mvengine.config import DEFAULT_SPARK_CONF, Config, derby_database
from mvengine.errors import MvError
from mvengine.runtime.connect import server_settings
from mvengine.runtime.crash_points import boundary

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

JAVA_HINT = (
    "install Java 17 (Debian/Ubuntu: sudo apt-get install openjdk-17-jre-headless; "
    "macOS: brew install openjdk@17) or set JAVA_HOME, or run `bash scripts/ensure-java.sh`"
)


def _java_version_text() -> str | None:
    """What `java -version` prints for the Java Spark would start, or None when there is none."""
    home = os.environ.get("JAVA_HOME")
    binary = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not binary or not os.path.exists(binary):
        return None
    return _version_printed(binary)


@functools.cache
def _version_printed(binary: str) -> str:
    """Asked once per process and Java (a start needs it twice: the version check and the class archive's name)."""
    return subprocess.run([binary, "-version"], capture_output=True, text=True).stderr


def java_version() -> int | None:
    """Major version of the Java Spark would start, or None when there is none."""
    out = _java_version_text()
    if out is None:
        return None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major


def worker_python() -> str:
    """This interpreter, through the `mvengine-worker-python` launcher installed beside it when there is one
    (it makes Spark's Python processes start faster; see mvengine.runtime.worker_python)."""
    launcher = os.path.join(os.path.dirname(sys.executable), "mvengine-worker-python")
    return launcher if os.access(launcher, os.X_OK) else sys.executable


DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"


def jars_folder() -> str:
    """Where Delta's connector is: the folder `MVENGINE_JARS` names, or the `jars/` folder of the checkout."""
    folder = os.environ.get("MVENGINE_JARS") or os.path.join(os.path.dirname(__file__), "..", "..", "jars")
    return os.path.abspath(folder)


def delta_jars() -> list[str]:
    """The jars of Delta's Spark connector mvengine adds to Spark: those in `MVENGINE_JARS`, or in the `jars/`
    folder of the checkout mvengine runs from; none when there are none (Spark may bring Delta itself)."""
    return sorted(glob.glob(os.path.join(jars_folder(), "*.jar")))


def class_archive() -> str:
    """The path of the class-data-sharing archive for this Java, PySpark and Delta jars (its name says which; it
    exists once `python -m mvengine.cli.class_archive` has built it). Mapping the classes Spark loads from one
    file, instead of reading and verifying them from jars, takes seconds off a start (see that module)."""
    import pyspark

    identity = "\n".join(
        [_java_version_text() or "", pyspark.__version__, *map(os.path.basename, delta_jars())]
    )
    digest = hashlib.sha256(identity.encode()).hexdigest()[:12]
    return os.path.join(jars_folder(), f"spark-classes-{digest}.jsa")


def _derby_folder(settings: dict[str, str]) -> str | None:
    """The folder of the embedded Derby metastore the settings name (config.py metastore_defaults), if any."""
    database = derby_database(settings)
    if database is None:
        return None
    folder = os.path.dirname(database)
    os.makedirs(folder, exist_ok=True)  # (for Derby's log, which it opens before it makes its database)
    return folder


def driver_java_options(derby_folder: str | None = None) -> str:
    """The driver JVM's options: Spark's logging quiet (without a log4j2 file it prints its default-profile
    banner and start-up warnings), and the class archive when there is one. A JVM that cannot use the archive
    (another Java, a changed class path) starts without it, silently: `-Xlog:cds=off` keeps it from saying so
    on standard output."""
    log_config = os.path.join(os.path.dirname(__file__), "log4j2.properties")
    options = [f"-Dlog4j2.configurationFile=file:{log_config}"]
    if derby_folder:  # (Derby writes its log in the working folder otherwise)
        options.append(f"-Dderby.stream.error.file={os.path.join(derby_folder, 'derby.log')}")
    archive = class_archive()
    if os.path.exists(archive):
        options += [f"-XX:SharedArchiveFile={archive}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]
    return " ".join(options)


def _with_delta(settings: dict[str, str]) -> None:
    """Add Delta's connector to the settings, when mvengine has its jars (the user's settings win)."""
    jars = delta_jars()
    if not jars:
        return
    given = [j for j in settings.get("spark.jars", "").split(",") if j]
    settings["spark.jars"] = ",".join(given + [j for j in jars if j not in given])
    settings.setdefault("spark.sql.extensions", DELTA_EXTENSION)
    settings.setdefault("spark.sql.catalog.spark_catalog", DELTA_CATALOG)
    partitions = settings.get("spark.sql.shuffle.partitions", "2")
    # Delta rebuilds a table's state in 50 partitions by default: 50 tasks for every small table read here.
    settings.setdefault("spark.databricks.delta.snapshotPartitions", partitions)
    # Delta's VACUUM lists a table's files in spark.sql.sources.parallelPartitionDiscovery.parallelism tasks,
    # 10,000 by default: 45 s for a table of a few files on 2 cores, 4.5 s in as many tasks as shuffle partitions.
    settings.setdefault("spark.sql.sources.parallelPartitionDiscovery.parallelism", partitions)


def local_driver_memory() -> str:
    """The default heap of a local Spark (driver and executors in one JVM): a quarter of the machine's memory,
    from 1 GiB (Spark's own default, which a 10M-row join's bootstrap outgrew) to 8 GiB."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return "1g"
    return f"{max(1, min(8, total // 4 // 2**30))}g"


def spark_session(
    config: Config | None = None, *, master: str | None = None, conf: dict[str, str] | None = None
) -> SparkSession:
    """Get (or create) the process's SparkSession, configured for mvengine.

    Precedence: explicit `master`/`conf` arguments, then conf/mvengine.toml, then mvengine's defaults
    (local[*], few shuffle partitions, UI off, UTC session time zone, Arrow on).
    """
    chosen_master = master or (config.spark_master if config else "local[*]")
    if chosen_master.startswith("sc://"):
        # Measured (docs/guides/object-store-and-cluster.md): `mvdelta` reads tables and change feeds over
        # Spark Connect, but a refresh needs the SparkContext and reads its query's checkpoint on the driver.
        raise MvError(
            f"Spark Connect ({chosen_master}) is not supported: mvengine runs as the Spark driver",
            hint="set [spark] master to the cluster's master URL (spark://host:7077, yarn, k8s://...) "
            "and run mv on a machine that reaches it",
        )
    version = java_version()
    if version is None or version < 17:
        found = "no Java was found" if version is None else f"Java {version} was found"
        raise MvError(f"Spark needs Java 17 or 21, but {found}", hint=JAVA_HINT)
    # Workers must run this interpreter, which has mvengine and its dependencies installed.
    os.environ["PYSPARK_PYTHON"] = worker_python()
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

    from pyspark.sql import SparkSession

    settings = dict(config.spark_conf if config else DEFAULT_SPARK_CONF)
    settings.update(conf or {})
    settings.setdefault("spark.driver.extraJavaOptions", driver_java_options(_derby_folder(settings)))
    for key, value in server_settings().items():  # (so that a long-running command can serve it: connect.py)
        settings.setdefault(key, value)
    _with_delta(settings)
    if chosen_master.startswith("local"):
        settings.setdefault("spark.driver.memory", local_driver_memory())
    builder = SparkSession.builder.master(chosen_master)
    builder = builder.appName("mvengine")
    for key, value in settings.items():
        builder = builder.config(key, value)
    with _jvm_warning_filtered():
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(config.spark_log_level if config else "ERROR")
    # PySpark logs every analysis error as a JSON line on stderr before raising it; mvengine reports the
    # error itself (one line, with a hint), so those logs only repeat it with a Java stack trace.
    from pyspark.logger import PySparkLogger

    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)
    register_data_sources(spark)
    # What exists now (the modules, Spark's Python side) lives as long as the process: out of the collector's
    # reach, a full collection scans ~5,000 objects instead of ~120,000 (77 → 28 ms each in a Nexmark run).
    gc.freeze()
    boundary("spark", "start", "after")
    return spark


# The JVM prints this when Spark's launcher adds `--add-modules=jdk.incubator.vector`; no JVM flag silences it.
_JVM_NOISE = b"WARNING: Using incubator modules"


@contextmanager
def _jvm_warning_filtered() -> Iterator[None]:
    """Start the JVM with its standard error on a pipe, forwarded line by line to ours without the incubator
    warning: the JVM inherits file descriptor 2 when it is launched, so the pipe is there for its whole life,
    while ours is put back as soon as it has started."""
    read_end, write_end = os.pipe()
    ours = os.dup(2)
    threading.Thread(
        target=_forward_jvm_stderr, args=(read_end, ours), name="jvm-stderr", daemon=True
    ).start()
    os.dup2(write_end, 2)
    os.close(write_end)
    try:
        yield
    finally:
        os.dup2(ours, 2)


def _forward_jvm_stderr(read_end: int, target: int) -> None:
    with os.fdopen(read_end, "rb") as pipe:
        for line in iter(pipe.readline, b""):
            if not line.startswith(_JVM_NOISE):
                os.write(target, line)
    os.close(target)


class SparkOnDemand:
    """A SparkSession started the first time something uses it: a refresh whose batches all run on the driver
    (incremental/driver.py) never starts the JVM, which takes ~7 s on 2 cores. Every attribute is the
    session's, so it stands in for one; `started_at` and `start_seconds` let a batch leave Spark's start out of
    its own time."""

    def __init__(self, start: Callable[[], SparkSession], on_start: Callable[[float], None]) -> None:
        self._start = start
        self._on_start = on_start
        self._session: SparkSession | None = None
        self.started_at: float | None = None  # time.monotonic() when the start began
        self.start_seconds = 0.0

    @property
    def started(self) -> bool:
        return self._session is not None

    def session(self) -> SparkSession:
        if self._session is None:
            self.started_at = time.monotonic()
            self._session = self._start()
            self.start_seconds = time.monotonic() - self.started_at
            self._on_start(self.start_seconds)
        return self._session

    def __getattr__(self, name: str):
        return getattr(self.session(), name)


def register_data_sources(spark: SparkSession) -> None:
    from mvengine.storage.datasource import DeltaDataSource

    spark.dataSource.register(DeltaDataSource)
