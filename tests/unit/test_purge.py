"""Purge.may_match: a batch's MERGE deletes the rows past a view's lateness only when the state table's log says
some file may hold one (a MERGE that deletes rows it is not given reads every file)."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from mvengine.incremental.purge import Purge
from mvengine.storage.tables import TableRef

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@pytest.fixture
def table(tmp_path) -> TableRef:
    """Two files: `_end` 100 and 200 ms (in µs), and 300 and NULL; `e` the same as timestamps (Delta's statistics
    keep a timestamp to the millisecond, rounded down: a bound between is matched, which only costs a read)."""
    for ends in ([100_000, 200_000], [300_000, None]):
        write_deltalake(
            str(tmp_path),
            pa.table(
                {
                    "_end": pa.array(ends, pa.int64()),
                    "e": pa.array(
                        [None if e is None else EPOCH + dt.timedelta(microseconds=e) for e in ends],
                        pa.timestamp("us", tz="UTC"),
                    ),
                }
            ),
            mode="append",
        )
    return TableRef(str(tmp_path))


@pytest.mark.parametrize("column", ["_end", "e"])
def test_a_purge_may_match_only_where_a_files_least_value_is_at_most_its_bound(table, column):
    assert not Purge(column, 99_999).may_match(table)
    assert Purge(column, 100_000).may_match(table)
    assert Purge(column, 99_999, nulls=True).may_match(table)  # (the second file holds a NULL)


def test_a_purge_writes_the_condition_delta_rs_merges_by():
    assert Purge('a"b', 5).condition() == 'CAST(t."a""b" AS BIGINT) <= 5'
    assert Purge("_end", 5, nulls=True).condition() == '(t."_end" IS NULL OR CAST(t."_end" AS BIGINT) <= 5)'


def test_a_large_state_table_is_purged_in_every_nth_batch_only(table):
    """A purge reads the whole table: one of n times policy.purge_scan_rows rows (here 4 rows, 2 a purge) is
    purged in every 2nd batch, by batch id; a small one in every batch."""
    from dataclasses import replace

    from mvengine.incremental.state import StateStore
    from mvengine.policy import DEFAULT_POLICY

    def purges(batch_id: int, scan_rows: int, at_most: int = 100_000) -> bool:
        policy = replace(DEFAULT_POLICY, purge_scan_rows=scan_rows)
        state = StateStore(None, "", {}, "app", batch_id, fresh=False, policy=policy)  # type: ignore[arg-type]
        return state._purges(table, Purge("_end", at_most))

    assert [purges(b, 2) for b in range(4)] == [True, False, True, False]
    assert [purges(b, 4) for b in range(4)] == [True] * 4
    assert not purges(0, 4, at_most=99_999)  # (no file can hold a row to drop)
