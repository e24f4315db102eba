"""A new view over a large table against Spark's own `CREATE TABLE ... USING delta AS SELECT` (issue 39, point 4).

One source `t (id BIGINT, g BIGINT, v INT)` of --rows rows, written once by Spark (`spark.range`, the change
data feed on, as mvengine makes its sources). Per query and round, by turns in one warm Spark session:

- CTAS: `CREATE OR REPLACE TABLE delta.<path> USING delta AS <query>` over the source;
- mvengine: the same query declared as a new view (`CREATE MATERIALIZED VIEW <name>_r<i> AS <query>`, a fresh
  name each round: what a user adding a view gets), and the refresh that builds it (its bootstrap: the
  snapshot, its first changelog version and its delta rule's state, each a Delta table).

Prints the median seconds of each and their ratio, and the last bootstrap's phase profile (runtime/profile.py).

    python benchmarks/bootstrap_scale.py --rows 100000000 --repeat 2
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from phases import median_phases  # benchmarks/phases.py

from mvengine.config import load_config
from mvengine.project.catalog import load_catalog
from mvengine.runtime.refresh import BatchReport, Refresher
from mvengine.runtime.session import spark_session

SOURCE = "CREATE TABLE t (id BIGINT NOT NULL, g BIGINT, v INT, PRIMARY KEY (id) NOT ENFORCED);\n"
QUERIES = {
    "groupby": "SELECT g, COUNT(*) AS n, SUM(v) AS total, MAX(v) AS top FROM t GROUP BY g",
    "filter": "SELECT id, g, v * 2 AS v2 FROM t WHERE v % 10 <> 0",
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=100_000_000)
    parser.add_argument("--groups", type=int, default=1_000_000, help="distinct values of g")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--queries", nargs="*", default=list(QUERIES), choices=list(QUERIES))
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="mvbootstrap"))
    (root / "views").mkdir()
    views = root / "views" / "bench.sql"
    views.write_text(SOURCE)
    config = load_config(root)
    spark = spark_session(config, master="local[2]")
    Refresher(spark, config, load_catalog(config)).prepare_sources()
    source = load_catalog(config).sources["t"].path
    started = time.monotonic()
    spark.range(args.rows).selectExpr(
        "id", f"id % {args.groups} AS g", "CAST(id * 7 % 1000 AS INT) AS v"
    ).write.format("delta").mode("append").save(source)
    print(f"{args.rows:,} rows written by Spark in {time.monotonic() - started:.0f} s ({source})", flush=True)
    for query in args.queries:
        ctas, ours, rounds = [], [], []
        for i in range(args.repeat):
            target = root / f"ctas_{query}_{i}"
            sql = QUERIES[query].replace("FROM t", f"FROM delta.`{source}`")
            started = time.monotonic()
            spark.sql(f"CREATE OR REPLACE TABLE delta.`{target}` USING delta AS {sql}")
            ctas.append(time.monotonic() - started)
            with views.open("a") as f:
                f.write(f"CREATE MATERIALIZED VIEW {query}_r{i} AS {QUERIES[query]};\n")
            config = load_config(root)
            batches: list[BatchReport] = []
            refresher = Refresher(spark, config, load_catalog(config), report=batches.append)
            started = time.monotonic()
            refresher.refresh(names=[f"{query}_r{i}"])
            ours.append(time.monotonic() - started)
            rounds.append(list(batches))
            print(f"{query} round {i + 1}: CTAS {ctas[-1]:.1f} s, mvengine {ours[-1]:.1f} s", flush=True)
        c, o = statistics.median(ctas), statistics.median(ours)
        print(f"{query}: CTAS median {c:.1f} s, mvengine bootstrap median {o:.1f} s, {o / c:.2f}x CTAS")
        print(median_phases(rounds[-1:]), flush=True)


if __name__ == "__main__":
    main()
