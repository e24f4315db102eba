"""One local Spark session for the whole run (local[2], 2 shuffle partitions, UI off), real Delta tables in
temporary folders."""

from __future__ import annotations

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
