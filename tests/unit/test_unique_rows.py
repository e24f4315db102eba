"""storage.files.unique_rows: the key check a bootstrap's snapshot write makes as its rows, sorted by the key,
go by (runtime/emit.py, `_checked_on_write`). It must refuse exactly the rows in which a key occurs twice (NULL
equal to NULL, as Spark groups keys), wherever the batches split them, and pass every batch on unchanged."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mvengine.storage.files import DUPLICATE_KEY, unique_rows
from tests.conftest import examples

KEYS = st.lists(
    st.tuples(st.one_of(st.none(), st.integers(0, 4)), st.sampled_from([None, "a", "b"])), max_size=12
)


def _sorted(keys):
    return sorted(keys, key=lambda k: tuple((v is not None, v if v is not None else 0) for v in k))


@settings(max_examples=examples(200), deadline=None)
@given(keys=KEYS, cuts=st.lists(st.integers(0, 12), max_size=4))
def test_a_key_written_twice_is_refused_wherever_the_batches_split(keys, cuts):
    keys = _sorted(keys)
    table = pa.table(
        {
            "k": pa.array([k for k, _ in keys], pa.int64()),
            "s": pa.array([s for _, s in keys], pa.string()),
            "x": pa.array(range(len(keys)), pa.int64()),
        }
    )
    bounds = sorted({0, len(keys), *[min(c, len(keys)) for c in cuts]})
    batches = [b for lo, hi in zip(bounds, bounds[1:]) for b in table.slice(lo, hi - lo).to_batches()]
    batches.insert(len(batches) // 2, pa.RecordBatch.from_pylist([], schema=table.schema))  # (an empty one)
    twice = len(set(keys)) < len(keys)
    if twice:
        with pytest.raises(ValueError, match=DUPLICATE_KEY):
            list(unique_rows(batches, ["k", "s"]))
    else:
        passed = list(unique_rows(batches, ["k", "s"]))
        assert pa.Table.from_batches(passed, table.schema).equals(table)


def test_the_refusal_names_the_key():
    batches = (
        pa.table({"k": [1, 2], "s": ["a", None]}).to_batches()
        + pa.table({"k": [2, 3], "s": [None, "c"]}).to_batches()
    )
    with pytest.raises(ValueError, match=r"\(k=2, s=None\)"):
        list(unique_rows(batches, ["k", "s"]))
