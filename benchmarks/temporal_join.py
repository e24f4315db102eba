"""A temporal join over a stream of orders and a stream of rate changes, refreshed after each of --batches
appends: whether a batch's time stays flat as the streams grow (incremental/temporal_join.py: new orders read the
rates of their currencies; a rate change re-reads the orders of its currency from its time on, which Delta's file
statistics narrow to the last files).

Two append-only sources: orders, --rows a batch (currencies drawn from --currencies), their times the wall
clock's less up to a second; rates, --rates changes a batch, each dated up to two seconds back (so some arrive
after orders of their time, and move them). Two views of the same SQL, `SELECT ... FROM orders o JOIN rates FOR
SYSTEM_TIME AS OF o.ts AS r ON o.cur = r.cur`: `incremental`, as planned, and `recomputed`, with
'refresh_policy' = 'full' (the join recomputed from both streams every batch). Each runs in a project of its
own, by turns per batch; prints the median refresh time of the first, middle and last ten batches, and the phases
of the incremental view's first and last ten batches.

    .venv/bin/python benchmarks/temporal_join.py                   # 100 batches on the driver
    .venv/bin/python benchmarks/temporal_join.py --engine spark    # every incremental batch in Spark
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from phases import median_phases  # noqa: E402

from mvengine.config import load_config  # noqa: E402
from mvengine.project.catalog import load_catalog  # noqa: E402
from mvengine.runtime.refresh import BatchReport, Refresher  # noqa: E402
from mvengine.runtime.session import spark_session  # noqa: E402

SOURCES = """
CREATE TABLE orders (id BIGINT NOT NULL, cur BIGINT, amount DECIMAL(12, 2), ts TIMESTAMP,
                     WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH ('append_only' = 'true');
CREATE TABLE rates (cur BIGINT, rate DECIMAL(10, 4), ts TIMESTAMP,
                    WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH ('append_only' = 'true');
"""
VIEW = """CREATE MATERIALIZED VIEW {name} WITH ('refresh_policy' = '{policy}') AS
SELECT o.id, o.amount * r.rate AS amount_eur, r.ts AS rate_ts
FROM orders o JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.cur = r.cur;
"""


def project(root: Path, name: str, policy: str) -> Path:
    (root / "views").mkdir(parents=True)
    (root / "views" / "sources.sql").write_text(SOURCES)
    (root / "views" / "view.sql").write_text(VIEW.format(name=name, policy=policy))
    return root


def _times(n: int, back: float, rng: random.Random) -> pa.Array:
    now = dt.datetime.now(dt.UTC)
    return pa.array(
        sorted(now - dt.timedelta(seconds=rng.uniform(0, back)) for _ in range(n)),
        pa.timestamp("us", tz="UTC"),
    )


def orders(first_id: int, n: int, currencies: int, rng: random.Random) -> pa.Table:
    amounts = [Decimal(rng.randrange(1, 100_000)) / 100 for _ in range(n)]
    return pa.table(
        {
            "id": pa.array(range(first_id, first_id + n), pa.int64()),
            "cur": pa.array([rng.randrange(currencies) for _ in range(n)], pa.int64()),
            "amount": pa.array(amounts, pa.decimal128(12, 2)),
            "ts": _times(n, 1, rng),
        }
    )


def rates(n: int, currencies: int, rng: random.Random, back: float) -> pa.Table:
    values = [Decimal(rng.randrange(5_000, 15_000)) / 10_000 for _ in range(n)]
    return pa.table(
        {
            "cur": pa.array([rng.randrange(currencies) for _ in range(n)], pa.int64()),
            "rate": pa.array(values, pa.decimal128(10, 4)),
            "ts": _times(n, back, rng),
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--rows", type=int, default=1000, help="orders per batch")
    parser.add_argument("--rates", type=int, default=5, help="rate changes per batch")
    parser.add_argument("--currencies", type=int, default=20)
    parser.add_argument("--engine", choices=["driver", "spark"], default="driver")
    args = parser.parse_args()
    spark = spark_session(master="local[2]", conf={"spark.sql.shuffle.partitions": "2"})
    base = Path(tempfile.mkdtemp(prefix="temporal-join-"))
    runs = {}
    for name, policy in (("incremental", "incremental_strict"), ("recomputed", "full")):
        root = project(base / name, name, policy)
        config = load_config(root)
        if args.engine == "spark":
            config = replace(config, policy=replace(config.policy, driver_max_changes=0))
        catalog = load_catalog(config)
        print(f"{name}: {catalog.plans[name].state}", flush=True)
        reports: list[list[BatchReport]] = []
        refresher = Refresher(spark, config, catalog, report=lambda r, reports=reports: reports[-1].append(r))
        reports.append([])
        refresher.refresh()  # (makes the sources, with their change data feeds)
        sources = (catalog.sources["orders"].path, catalog.sources["rates"].path)
        runs[name] = (refresher, sources, [], reports)
    rng = random.Random(7)
    first_rates = rates(args.currencies, args.currencies, rng, 60)  # every currency has a rate a minute back
    for _, (_, rates_path), _, _ in runs.values():
        write_deltalake(
            rates_path,
            first_rates.set_column(0, "cur", pa.array(range(args.currencies), pa.int64())),
            mode="append",
        )
    for batch in range(args.batches):
        new_orders = orders(batch * args.rows, args.rows, args.currencies, rng)
        new_rates = rates(args.rates, args.currencies, rng, 2)
        for refresher, (orders_path, rates_path), times, reports in runs.values():
            write_deltalake(orders_path, new_orders, mode="append")
            write_deltalake(rates_path, new_rates, mode="append")
            reports.append([])
            started = time.perf_counter()
            refresher.refresh()
            times.append(time.perf_counter() - started)
    thirds = {"first": slice(0, 10), "middle": slice(args.batches // 2 - 5, args.batches // 2 + 5)}
    thirds["last"] = slice(args.batches - 10, args.batches)
    print(f"{args.batches} batches of {args.rows} orders and {args.rates} rate changes, {args.engine}")
    print(f"{'view':12} {'median refresh ms: first 10':>28} {'middle 10':>10} {'last 10':>8}")
    for name, (_, _, times, _) in runs.items():
        medians = [statistics.median(times[s]) * 1000 for s in thirds.values()]
        print(f"{name:12} {medians[0]:28.0f} {medians[1]:10.0f} {medians[2]:8.0f}")
    reports = runs["incremental"][3]
    for third in ("first", "last"):
        print(f"incremental, the {third} ten batches:\n{median_phases(reports[1:][thirds[third]])}")
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
