"""One local Spark session for the whole run (local[2], 2 shuffle partitions, UI off), real Delta tables in
temporary folders.

Tiers by folder (tests/README.md): tests/unit (no Spark, no process: `make test-fast`), tests/spark (in this
process, on the one session), tests/system (real processes: the CLI, signals, crashes, cluster, object store,
browser, README). Each test gets its folder's marker. Every run writes where its time went, per test (seconds
of set-up, call and tear-down, of them the seconds in the differential oracle, and Spark jobs run in this
process), to test-profile.tsv.

Hypothesis: the `ci` profile (the default) runs the examples each test asks for; `nightly`
(HYPOTHESIS_PROFILE=nightly, `make test-nightly`) ten times as many (`examples(n)`)."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, settings

from mvengine.storage.tables import TableRef


def pytest_addoption(parser):
    parser.addoption(
        "--update-golden",
        action="store_true",
        help="rewrite the expected files of golden tests (tests/plans/expected) from current output",
    )


# A pytest-xdist worker runs its tests from `python -c`: its __main__ has neither __spec__ nor __file__, which
# pyspark.sql.connect (imported by great_expectations) takes for a doctest run without grpc, and exits the
# worker with code 0. A file name tells it otherwise.
if getattr(sys.modules["__main__"], "__spec__", None) is None and not hasattr(
    sys.modules["__main__"], "__file__"
):
    sys.modules["__main__"].__file__ = "pytest-xdist-worker"

TIERS = ("unit", "spark", "system")
PROFILE = Path(__file__).parent.parent / "test-profile.tsv"

settings.register_profile("ci", deadline=None, print_blob=True)  # timings on a loaded 2-core machine vary
settings.register_profile("nightly", deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def examples(n: int) -> int:
    """A test's number of generated examples: `n` in the ci profile, ten times as many in `nightly`."""
    return n * 10 if os.environ.get("HYPOTHESIS_PROFILE") == "nightly" else n


def refresh_settings(n: int) -> settings:
    """Hypothesis's settings for a test whose every example refreshes a project: `examples(n)` examples, the
    explicit ones first, no shrinking (a failure is reported as generated: shrinking would rerun whole refreshes
    dozens of times), no deadline, and function-scoped fixtures (the Spark session, temporary folders) shared."""
    return settings(
        max_examples=examples(n),
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )


def phases_of_costly() -> list[Phase]:
    """The phases of a test whose every example costs minutes: its explicit examples in the ci profile, and
    generated ones as well in `nightly` (`make test-nightly`)."""
    if os.environ.get("HYPOTHESIS_PROFILE") == "nightly":
        return [Phase.explicit, Phase.generate]
    return [Phase.explicit]


def pytest_collection_modifyitems(config, items):
    for item in items:
        tier = Path(str(item.fspath)).parent.name
        if tier in TIERS:
            item.add_marker(getattr(pytest.mark, tier))


_SPENT: dict[str, list[float]] = {}  # test id → [set-up, call, tear-down seconds, Spark jobs, oracle seconds]
_ORACLE_S = [0.0, 0]  # seconds spent in `oracle()` by this process, and how deep in it we are


@contextlib.contextmanager
def oracle() -> Iterator[None]:
    """Count the time of a check against a from-scratch answer (the differential oracle) apart, in the
    profile: what a test spends checking against what it spends refreshing. Nested uses count once."""
    start = time.perf_counter()
    _ORACLE_S[1] += 1
    try:
        yield
    finally:
        _ORACLE_S[1] -= 1
        if not _ORACLE_S[1]:
            _ORACLE_S[0] += time.perf_counter() - start


def _spark_jobs() -> int:
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    return int(active.sparkContext._jsc.sc().dagScheduler().nextJobId()) if active is not None else 0


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    jobs, checking = _spark_jobs(), _ORACLE_S[0]
    yield
    spent = _SPENT.setdefault(item.nodeid, [0.0, 0.0, 0.0, 0, 0.0])
    spent[3:] = [_spark_jobs() - jobs, _ORACLE_S[0] - checking]


def pytest_runtest_logreport(report):
    spent = _SPENT.setdefault(report.nodeid, [0.0, 0.0, 0.0, 0, 0.0])
    spent[("setup", "call", "teardown").index(report.when)] += report.duration


def pytest_sessionfinish(session):
    if not _SPENT:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    path = PROFILE.with_suffix(f".{worker}.tsv") if worker else PROFILE
    rows = sorted(_SPENT.items(), key=lambda kv: -sum(kv[1][:3]))
    path.write_text(
        "seconds\tsetup\tcall\tteardown\tspark_jobs\toracle_s\ttest\n"
        + "".join(
            f"{sum(v[:3]):.2f}\t{v[0]:.2f}\t{v[1]:.2f}\t{v[2]:.2f}\t{v[3]}\t{v[4]:.2f}\t{k}\n"
            for k, v in rows
        )
    )


@pytest.fixture(scope="session")
def spark():
    from mvengine.runtime.session import spark_session

    # Adaptive execution off: it plans again after every shuffle stage (a Spark job each), which on a test's few
    # rows only costs (aggregates and joins: 15% less time). Generated code off (whole-stage and per expression):
    # compiling it costs more than it saves on a few hundred rows (Nexmark, aggregates and key types: 117 s ->
    # 96 s; joins and window functions: 125 s -> 98 s; the same hypothesis seed); Spark's interpreted and generated
    # evaluation are held to the same answers by Spark's own tests. No answer depends on either setting, and the
    # `mv` processes the system tier starts (the README's, the cluster's differential test, crashes, the object
    # store) run mvengine's own settings, generated code included.
    session = spark_session(
        master="local[2]",
        conf={
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.sql.adaptive.enabled": "false",
            "spark.sql.codegen.wholeStage": "false",
            "spark.sql.codegen.factoryMode": "NO_CODEGEN",
        },
    )
    yield session
    for query in session.streams.active:
        query.stop()


@pytest.fixture
def table(tmp_path: Path):
    """A factory of references to (not yet existing) tables under the test's temp folder."""

    def make(name: str = "t") -> TableRef:
        return TableRef(str(tmp_path / name), name=name)

    return make


class RefreshClock:
    """The refresh's clock (runtime/event_time.now_micros) in µs since the epoch, as a test sets it: real seconds
    would make every run another test."""

    START = dt.datetime(2026, 11, 23, 12, 0, 12, tzinfo=dt.UTC)

    def __init__(self) -> None:
        self.now = int(self.START.timestamp() * 1_000_000)

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock(monkeypatch) -> RefreshClock:
    """The refresh's clock, at RefreshClock.START until the test moves it (`clock.now += ...`)."""
    from mvengine.runtime import event_time

    clock = RefreshClock()
    monkeypatch.setattr(event_time, "now_micros", clock)
    return clock


def rows(df) -> list[tuple]:
    """A DataFrame's rows as sorted tuples (a bag, comparable with ==)."""
    return sorted(
        (tuple(r) for r in df.collect()), key=lambda t: [(x is None, x if x is not None else 0) for x in t]
    )


def bag(df) -> list[str]:
    """A DataFrame's rows as a sorted list of reprs: a bag where NaN equals NaN."""
    return sorted(repr(tuple(r)) for r in df.collect())


SCORES_DAY = dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.UTC)


# For a project of a test that runs `mv` in processes of its own and is not about Spark's catalog: registering
# the views there starts the metastore's client (~7 s) in the first refresh of every project. The catalog's own
# tests (tests/system/test_catalog.py, the README's commands and the first of test_cli_refresh.py) register.
NO_REGISTRATION = "[catalog]\nregister = false\n"


def write_project(root: Path, sources: str, views: str, conf: str | None = None) -> Path:
    """A project folder: views/sources.sql, views/views.sql and, with `conf`, conf/mvengine.toml."""
    (root / "views").mkdir(parents=True)
    (root / "views" / "sources.sql").write_text(sources)
    (root / "views" / "views.sql").write_text(views)
    if conf is not None:
        (root / "conf").mkdir()
        (root / "conf" / "mvengine.toml").write_text(conf)
    return root


def add_scores(catalog, rows: list[tuple[str, int, int]]) -> None:
    """Append scores (team, score, seconds after 12:00 on SCORES_DAY, or None: no time) to the source `scores`
    (team STRING, score INT, ts TIMESTAMP) of the event-time tests."""
    import pyarrow as pa
    from deltalake import write_deltalake

    write_deltalake(
        TableRef(catalog.sources["scores"].path).uri,
        pa.table(
            {
                "team": pa.array([r[0] for r in rows], pa.string()),
                "score": pa.array([r[1] for r in rows], pa.int32()),
                "ts": pa.array(
                    [None if r[2] is None else SCORES_DAY + dt.timedelta(seconds=r[2]) for r in rows],
                    pa.timestamp("us", tz="UTC"),
                ),
            }
        ),
        mode="append",
    )


class ObjectStore:
    """A real S3 server on loopback (moto_server) and the storage options that reach it. The access keys are
    read from environment variables (`${MV_TEST_AWS_KEY_ID}` in a project's conf), as a user's would be."""

    KEY_ID = "AKIAMVENGINETEST0001"
    SECRET = "mvengine-test-secret-Zq8vW1xYk3"  # grepped for by the tests that check it never leaks

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self._buckets = 0

    @property
    def options(self) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_REGION": "us-east-1",
            "AWS_ALLOW_HTTP": "true",
            "AWS_ACCESS_KEY_ID": self.KEY_ID,
            "AWS_SECRET_ACCESS_KEY": self.SECRET,
        }

    def conf(self, warehouse: str) -> str:
        """conf/mvengine.toml of a project whose every table is under `warehouse` on this store."""
        return (
            f'[project]\nwarehouse = "{warehouse}"\n\n[storage.options]\n'
            f'AWS_ENDPOINT_URL = "{self.endpoint}"\nAWS_REGION = "us-east-1"\nAWS_ALLOW_HTTP = "true"\n'
            'AWS_ACCESS_KEY_ID = "${MV_TEST_AWS_KEY_ID}"\nAWS_SECRET_ACCESS_KEY = "${MV_TEST_AWS_SECRET}"\n'
        )

    def bucket(self, name: str | None = None) -> str:
        """A new, empty bucket (named `name`, or a name of its own); its s3:// URI."""
        import boto3

        self._buckets += 1
        name = name or f"mv-test-{self._buckets}-{os.getpid()}"
        boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.KEY_ID,
            aws_secret_access_key=self.SECRET,
            region_name="us-east-1",
        ).create_bucket(Bucket=name)
        return f"s3://{name}"

    def objects(self, bucket_uri: str) -> dict[str, bytes]:
        """Every object of the bucket: key -> bytes."""
        import boto3

        s3 = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.KEY_ID,
            aws_secret_access_key=self.SECRET,
            region_name="us-east-1",
        )
        bucket = bucket_uri.removeprefix("s3://")
        keys = [
            o["Key"]
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
            for o in page.get("Contents", [])
        ]
        return {k: s3.get_object(Bucket=bucket, Key=k)["Body"].read() for k in keys}


@pytest.fixture(scope="session")
def object_store(tmp_path_factory):
    """moto's S3 server, one request at a time (tests/s3_server.py), on a free loopback port for the whole run,
    with the access keys in the environment (MV_TEST_AWS_KEY_ID, MV_TEST_AWS_SECRET) for projects that refer to
    them."""
    import socket
    import subprocess
    import sys
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    server = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("s3_server.py")), "127.0.0.1", str(port)],
        stdout=open(log, "w"),
        stderr=subprocess.STDOUT,
    )
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1)
            break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                raise RuntimeError(f"moto_server did not start: {log.read_text()[-2000:]}") from None
            time.sleep(0.2)
    store = ObjectStore(endpoint)
    saved = {k: os.environ.get(k) for k in ("MV_TEST_AWS_KEY_ID", "MV_TEST_AWS_SECRET")}
    os.environ.update(MV_TEST_AWS_KEY_ID=store.KEY_ID, MV_TEST_AWS_SECRET=store.SECRET)
    try:
        yield store
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        server.terminate()
        server.wait(timeout=10)
