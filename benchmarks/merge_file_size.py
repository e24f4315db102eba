"""What a MERGE of a few keys into a large keyed table costs, by the size of the table's files.

A keyed view's batch upserts its snapshot (and its state) by key with a delta-rs MERGE from the driver, which
rewrites every file holding a merged key. The table (id, v, name) of --rows rows is written sorted by id in files
of each --file-rows size; each round merges --keys contiguous ids, the way mvengine merges (in-memory source,
`=` on the key, delta-rs skipping the files whose statistics exclude the keys).

    python benchmarks/merge_file_size.py --rows 10000000 --file-rows 1000000 100000 --keys 10
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import numpy as np
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--file-rows", type=int, nargs="+", default=[1_000_000, 100_000])
    parser.add_argument("--keys", type=int, default=10, help="contiguous keys merged per round")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"{'rows':>10} {'file rows':>10} {'keys':>6} {'merge s':>8} {'files rewritten':>16}")
    for per_file in args.file_rows:
        path = tempfile.mkdtemp(prefix="mvmerge")
        for first in range(0, args.rows, per_file):
            write_deltalake(path, _rows(first, min(first + per_file, args.rows), 0), mode="append")
        times, rewritten = [], []
        for r in range(args.repeat):
            start = (r * 7919 * 17) % (args.rows - args.keys)
            started = time.perf_counter()
            metrics = (
                DeltaTable(path)
                .merge(
                    _rows(start, start + args.keys, r + 1),
                    "t.id = s.id",
                    source_alias="s",
                    target_alias="t",
                    streamed_exec=False,
                )
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute()
            )
            times.append(time.perf_counter() - started)
            rewritten.append(metrics["num_target_files_removed"])
        print(
            f"{args.rows:>10} {per_file:>10} {args.keys:>6} {statistics.median(times):>8.3f} "
            f"{statistics.median(rewritten):>16.0f}",
            flush=True,
        )


def _rows(first: int, stop: int, revision: int) -> pa.Table:
    ids = np.arange(first, stop, dtype=np.int64)
    return pa.table({"id": ids, "v": (ids + revision) % 89, "name": pa.array((ids % 1000).astype(str))})


if __name__ == "__main__":
    main()
