"""What a small upsert into a state-sized Delta table costs: delta-rs's MERGE against the same upsert done by hand
(the touched file read, rewritten with the new rows, and committed as one remove and one add through delta-rs's
transaction API). A batch on the driver commits three to four tables per view this way (benchmarks/README.md,
q5, q17 and q18 at 100k events a batch), so this is the floor a MERGE of mvengine's own would lower.

    python benchmarks/merge_cost.py [--rows 20000] [--upserts 20]

Prints the median milliseconds of each. The by-hand upsert keeps no file statistics and writes no change data
feed: it measures the work, not a replacement.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake
from deltalake.transaction import AddAction, RemoveAction


def _upsert_rows(i: int, rows: int) -> pa.Table:
    """One key the table has (a different one each time) and one it has not."""
    return pa.table({"k": pa.array([i * 7 % rows, rows + i], pa.int64()), "v": pa.array([i, i], pa.int64())})


def merge_by_delta_rs(dt: DeltaTable, rows: pa.Table) -> None:
    merger = dt.merge(rows, "t.k = s.k", source_alias="s", target_alias="t")
    merger.when_matched_update_all().when_not_matched_insert_all().execute()


def merge_by_hand(dt: DeltaTable, rows: pa.Table) -> None:
    folder = dt.table_uri.removeprefix("file://")
    actions = pa.table(dt.get_add_actions(flatten=True))
    keys = rows.column("k").to_pylist()
    touched = [
        path
        for path, low, high in zip(
            actions.column("path").to_pylist(),
            actions.column("min.k").to_pylist(),
            actions.column("max.k").to_pylist(),
        )
        if low is None or any(low <= k <= high for k in keys)
    ]
    old = pa.concat_tables([pq.read_table(os.path.join(folder, p)) for p in touched])
    new = pa.concat_tables([old.filter(pc.invert(pc.is_in(old.column("k"), rows.column("k")))), rows])
    name = f"part-{uuid.uuid4().hex}.parquet"
    pq.write_table(new, os.path.join(folder, name))
    now = int(time.time() * 1000)
    size = os.path.getsize(os.path.join(folder, name))
    removes = [RemoveAction(p, True, now) for p in touched]
    dt.create_write_transaction([*removes, AddAction(name, size, {}, now, True, None)], "append", new.schema)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20_000, help="rows of the table (default 20,000)")
    parser.add_argument("--upserts", type=int, default=20, help="upserts of each kind (default 20)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mvengine-merge-cost-") as folder:
        keys = pa.array(range(args.rows), pa.int64())
        write_deltalake(
            folder, pa.table({"k": keys, "v": keys}), configuration={"delta.enableChangeDataFeed": "true"}
        )
        dt = DeltaTable(folder)
        for upsert in (merge_by_delta_rs, merge_by_hand):
            spent = []
            for i in range(args.upserts):
                dt.update_incremental()
                started = time.perf_counter()
                upsert(dt, _upsert_rows(i, args.rows))
                spent.append((time.perf_counter() - started) * 1000)
            print(f"{upsert.__name__}: {statistics.median(spent):.1f} ms (median of {args.upserts})")


if __name__ == "__main__":
    main()
