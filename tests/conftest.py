"""One local Spark session for the whole run (local[2], 2 shuffle partitions, UI off), real Delta tables in
temporary folders."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from mvengine.storage.tables import TableRef


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true",
                     help="rewrite the expected files of golden tests (tests/plans/expected) from current output")


@pytest.fixture(scope="session")
def spark():
    from mvengine.runtime.session import spark_session

    session = spark_session(master="local[2]", conf={"spark.sql.shuffle.partitions": "2",
                                                     "spark.default.parallelism": "2"})
    yield session
    for query in session.streams.active:
        query.stop()


@pytest.fixture
def table(tmp_path: Path):
    """A factory of references to (not yet existing) tables under the test's temp folder."""

    def make(name: str = "t") -> TableRef:
        return TableRef(str(tmp_path / name), name=name)

    return make


def rows(df) -> list[tuple]:
    """A DataFrame's rows as sorted tuples (a bag, comparable with ==)."""
    return sorted((tuple(r) for r in df.collect()),
                  key=lambda t: [(x is None, x if x is not None else 0) for x in t])


def bag(df) -> list[str]:
    """A DataFrame's rows as a sorted list of reprs: a bag where NaN equals NaN."""
    return sorted(repr(tuple(r)) for r in df.collect())


SCORES_DAY = dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.UTC)


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
    """Append scores (team, score, seconds after 12:00 on SCORES_DAY) to the source `scores` (team STRING,
    score INT, ts TIMESTAMP) of the event-time tests."""
    import pyarrow as pa
    from deltalake import write_deltalake

    write_deltalake(TableRef(catalog.sources["scores"].path).uri, pa.table({
        "team": pa.array([r[0] for r in rows], pa.string()), "score": pa.array([r[1] for r in rows], pa.int32()),
        "ts": pa.array([SCORES_DAY + dt.timedelta(seconds=r[2]) for r in rows], pa.timestamp("us", tz="UTC"))}),
        mode="append")
