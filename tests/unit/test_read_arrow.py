"""Reading a table on the driver by keys, with a bound on the rows taken (storage/api.py `read_arrow`): the
bound counts the rows the keys name, not the rows the read passes over, and the driver gives a batch to Spark
when the keys name more (incremental/driver.py `read_before`)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from mvengine.storage.api import TooManyRows, read_arrow
from mvengine.storage.tables import TableRef


@pytest.fixture
def facts(tmp_path) -> TableRef:
    rows = pa.table(
        {"id": pa.array(range(1000), pa.int64()), "product": pa.array([i % 10 for i in range(1000)])}
    )
    for start in range(0, 1000, 250):  # four files, each holding every product
        write_deltalake(str(tmp_path / "facts"), rows.slice(start, 250), mode="append")
    return TableRef(str(tmp_path / "facts"), name="facts")


def test_a_read_by_keys_counts_the_rows_of_those_keys(facts):
    found = read_arrow(facts, where=("product", pa.array([3, 7])), most=200)
    assert found.num_rows == 200 and set(found.column("product").to_pylist()) == {3, 7}


def test_a_read_past_its_bound_stops(facts):
    with pytest.raises(TooManyRows):
        read_arrow(facts, where=("product", pa.array([3, 7])), most=199)
    with pytest.raises(TooManyRows):
        read_arrow(facts, most=999)
    assert read_arrow(facts, most=1000).num_rows == 1000


def test_a_read_within_a_time_range_opens_only_the_files_that_can_hold_it(tmp_path):
    """An interval join's read of a stream before a batch (incremental/join.py): the files whose statistics
    exclude the range are not opened (here one is gone from disk, as if it could not be read), and the rows are
    those of the range, with the keys asked for."""
    hour = 3_600_000_000
    for h in range(4):  # four files, one hour of a stream each
        times = pa.array([h * hour + i * 1_000_000 for i in range(100)], pa.timestamp("us", tz="UTC"))
        rows = pa.table({"ts": times, "user": pa.array([i % 5 for i in range(100)], pa.int64())})
        write_deltalake(str(tmp_path / "stream"), rows, mode="append")
    stream = TableRef(str(tmp_path / "stream"), name="stream")
    first = sorted((tmp_path / "stream").glob("*.parquet"), key=lambda p: p.stat().st_mtime)[0]
    first.unlink()  # the first hour's file
    within = (
        "ts",
        *(pa.scalar(t, pa.timestamp("us", tz="UTC")) for t in (2 * hour + 10_000_000, 2 * hour + 19_000_000)),
    )
    found = read_arrow(stream, where=("user", pa.array([1])), within=within)
    assert found.column("ts").cast(pa.int64()).to_pylist() == [2 * hour + s * 1_000_000 for s in (11, 16)]
    with pytest.raises(OSError):
        read_arrow(stream, where=("user", pa.array([1])))
