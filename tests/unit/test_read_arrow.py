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
