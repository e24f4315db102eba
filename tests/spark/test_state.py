"""State reads narrowed to the affected keys: whatever the narrowing (key list or key range), every state row
of an affected key is read, NULL keys included."""

from __future__ import annotations

import pytest

from mvengine.incremental.state import StateStore
from mvengine.policy import ExecutionPolicy
from mvengine.storage.api import write_table
from tests.conftest import rows


@pytest.mark.parametrize("most_keys", [10, 1], ids=["key list", "key range"])
def test_a_narrowed_state_read_keeps_every_row_of_the_affected_keys(spark, tmp_path, most_keys):
    # Narrowed however small the table, to at most `most_keys` keys listed.
    policy = ExecutionPolicy(state_pushdown_min_bytes=0, state_pushdown_keys=most_keys)
    store = StateStore(spark, str(tmp_path), {}, "view-1", 5, fresh=False, policy=policy)
    table = spark.createDataFrame([(k, k * 10) for k in range(100)] + [(None, -1)], "k int, n long")
    write_table(table, store.ref("acc"))
    keys = spark.createDataFrame([(7,), (42,), (None,)], "k int")
    candidates = store.read_candidates("acc", table.limit(0), keys, ["k"])
    assert {(7, 70), (42, 420), (None, -1)} <= set(rows(candidates))
    assert rows(store.read_for("acc", table.limit(0), keys, ["k"])) == [(7, 70), (42, 420), (None, -1)]
    if most_keys == 1:  # the range 7..42 (and NULL), not the whole table
        assert len(rows(candidates)) == 42 - 7 + 1 + 1
