"""End-to-end latency of `mv refresh --continuous`: from a source commit to the commit of the last view of a
three-view chain that reflects it.

The chain of refresh_join.py (per_dim → dim_totals → per_region over facts and dims, N fact rows). The
benchmark runs `mv refresh --continuous --interval 0.1s` in a child process, then makes --commits small commits
to facts (--changed rows updated each), one at a time: it commits, waits until per_region has a commit that
reflects that facts version (through the views it reads, as `mv describe` reports `source_versions`), and
takes the difference of the two commit times from the Delta logs. Writes go through delta-rs from this process:
no Spark here, so the child has the machine to itself.

    python benchmarks/continuous_latency.py --rows 100000 --commits 50
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
from deltalake import write_deltalake

from mvengine.config import load_config
from mvengine.project.catalog import load_catalog
from mvengine.project.layout import source_table
from mvengine.storage.sources import ensure_source_table
from mvengine.storage.tables import commit_metadata

sys.path.insert(0, str(Path(__file__).parent))
from continuous import reflected_at, refreshing  # benchmarks/continuous.py
from refresh_join import REGIONS, SQL  # the same project as the side-by-side benchmark

LAST_VIEW = "per_region"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=100_000, help="fact rows (dimension rows: 1%%)")
    parser.add_argument("--commits", type=int, default=50)
    parser.add_argument("--changed", type=int, default=10, help="fact rows updated per commit")
    parser.add_argument("--timeout", type=float, default=300, help="seconds to wait for one commit")
    parser.add_argument(
        "--log",
        help="write the refresh's output there, with the phases of every batch (mv refresh --profile)",
    )
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="mvlatency"))
    (root / "views").mkdir()
    (root / "views" / "bench.sql").write_text(SQL)
    config = load_config(root)
    catalog = load_catalog(config)
    facts = source_table(catalog.sources["facts"], {})
    dims = source_table(catalog.sources["dims"], {})
    for source, ref in (("facts", facts), ("dims", dims)):
        ensure_source_table(ref, catalog.sources[source].schema)
    n, dim_rows = args.rows, max(args.rows // 100, 1)
    for first in range(0, n, 1_000_000):  # files of at most 1M rows, as a refresh's writes have them
        write_deltalake(
            facts.uri, _facts(catalog, range(first, min(first + 1_000_000, n)), 0, dim_rows), mode="append"
        )
    write_deltalake(
        dims.uri,
        pa.Table.from_pylist(
            [{"d": d, "name": f"dim {d}", "region": d % REGIONS} for d in range(dim_rows)],
            schema=catalog.sources["dims"].schema,
        ),
        mode="append",
    )

    with refreshing(root, args.log):
        reflected_at(
            config, catalog, LAST_VIEW, "facts", facts.open().version(), args.timeout
        )  # the bootstrap
        latencies = []
        for i in range(args.commits):
            first = (i * 7919) % max(n - args.changed, 1)
            ref = facts.open()
            (
                ref.merge(
                    _facts(catalog, range(first, first + args.changed), i + 1, dim_rows),
                    "t.id = s.id",
                    source_alias="s",
                    target_alias="t",
                )
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute()
            )
            version = facts.open().version()
            committed = int(commit_metadata(facts.open(), version)["timestamp"])
            reflected = reflected_at(config, catalog, LAST_VIEW, "facts", version, args.timeout)
            latencies.append((reflected - committed) / 1000)
            print(
                f"commit {i + 1:>3}: facts@{version} in {LAST_VIEW} after {latencies[-1]:.2f} s", flush=True
            )
    p95 = statistics.quantiles(latencies, n=20)[-1] if len(latencies) > 1 else latencies[0]
    print(
        f"\n{len(latencies)} commits of {args.changed} rows, {n} fact rows: "
        f"p50 {statistics.median(latencies):.2f} s, p95 {p95:.2f} s, max {max(latencies):.2f} s"
    )


def _facts(catalog, ids: range, revision: int, dim_rows: int) -> pa.Table:
    id_ = pa.array(np.arange(ids.start, ids.stop, dtype=np.int64))
    shifted = np.arange(ids.start, ids.stop, dtype=np.int64) + revision
    return pa.Table.from_arrays(
        [id_, pa.array(shifted % dim_rows), pa.array(shifted % 89)], schema=catalog.sources["facts"].schema
    )


if __name__ == "__main__":
    main()
