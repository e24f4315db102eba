"""State reads narrowed to the affected keys: whatever the narrowing (key list or key range), every state row
of an affected key is read, NULL keys included."""

from __future__ import annotations

import pytest

from mvengine.incremental import state as state_module
from mvengine.incremental.state import StateStore
from mvengine.storage.api import write_table
from tests.conftest import rows


@pytest.mark.parametrize("most_keys", [10, 1], ids=["key list", "key range"])
def test_a_narrowed_state_read_keeps_every_row_of_the_affected_keys(spark, tmp_path, monkeypatch, most_keys):
    monkeypatch.setattr(state_module, "PUSHDOWN_MIN_BYTES", 0)  # narrow however small the table
    monkeypatch.setattr(state_module, "PUSHDOWN_KEYS", most_keys)
    store = StateStore(spark, str(tmp_path), {}, "view-1", 5, fresh=False)
    table = spark.createDataFrame([(k, k * 10) for k in range(100)] + [(None, -1)], "k int, n long")
    write_table(table, store.ref("acc"))
    keys = spark.createDataFrame([(7,), (42,), (None,)], "k int")
    candidates = store.read_candidates("acc", table.limit(0), keys, ["k"])
    assert {(7, 70), (42, 420), (None, -1)} <= set(rows(candidates))
    assert rows(store.read_for("acc", table.limit(0), keys, ["k"])) == [(7, 70), (42, 420), (None, -1)]
    if most_keys == 1:  # the range 7..42 (and NULL), not the whole table
        assert len(rows(candidates)) == 42 - 7 + 1 + 1
