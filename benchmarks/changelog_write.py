"""What writing a bootstrap's changelog costs, by writer (issue 39, point 4): the rows of a filter view over
--rows source rows (90% kept) with the changelog's ten columns, written by mvengine's writer (`write_table`:
the `mvdelta` data source, Parquet by the Python workers, one delta-rs commit), by Delta's own Spark connector
and as plain Parquet by Spark. Two rounds each, by turns, in one Spark session.

    python benchmarks/changelog_write.py --rows 10000000
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from mvengine.config import load_config
from mvengine.runtime.session import spark_session
from mvengine.storage.api import write_table
from mvengine.storage.tables import TableRef

CHANGELOG = [
    "id",
    "g",
    "v * 2 AS v2",
    "'+I' AS _op",
    "false AS _undo",
    "current_timestamp() AS _mtime",
    "CAST(0 AS BIGINT) AS _version",
    "CAST(1 AS BIGINT) AS _batch_id",
    "CAST(0 AS BIGINT) AS _emit_index",
    "CAST(NULL AS STRING) AS _emit_timing",
]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=10_000_000)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="mvchangelog"))
    (root / "views").mkdir()
    spark = spark_session(load_config(root), master="local[2]")
    source = str(root / "source")
    spark.range(args.rows).selectExpr(
        "id", "id % 1000000 AS g", "CAST(id * 7 % 1000 AS INT) AS v"
    ).write.format("parquet").save(source)

    def rows():
        return spark.read.parquet(source).where("v % 10 <> 0").selectExpr(*CHANGELOG)

    for i in range(2):
        started = time.monotonic()
        write_table(rows(), TableRef(str(root / f"mvengine{i}")))
        ours = time.monotonic() - started
        started = time.monotonic()
        rows().write.format("delta").save(str(root / f"delta{i}"))
        delta = time.monotonic() - started
        started = time.monotonic()
        rows().write.format("parquet").save(str(root / f"parquet{i}"))
        parquet = time.monotonic() - started
        print(
            f"round {i + 1}: mvengine's writer {ours:.1f} s, Delta's connector {delta:.1f} s, "
            f"Spark's Parquet {parquet:.1f} s",
            flush=True,
        )


if __name__ == "__main__":
    main()
