"""A star schema as a user's lake has it: incremental refresh against full recomputation (issue 42, point 5).

Written by Spark SQL into Delta with deletion vectors and the change data feed on:
    sales      N rows: id, sold_on DATE, ts TIMESTAMP, customer, product, store, quantity INT,
               price DECIMAL(12,2), amount DECIMAL(12,2)
    customers  N/100 rows: id, name, segment (5), country (25)
    products   N/1000 rows: id, name, category (20), brand (50), list_price DECIMAL(12,2)
    stores     200 rows: id, city, region (8)
Eight analytic views (VIEWS below): date bucketing, a four-table star join, a top-N over an aggregate, a
correlated and an uncorrelated scalar subquery, EXISTS, NOT IN, and a filtered sum of decimal arithmetic.
Each round changes C sales with Spark SQL through deletion vectors: an UPDATE of C/2 rows, a DELETE of C/4 and a
MERGE that inserts C/4. Then `refresh()` (incremental) and `refresh(full=True)` (each view recomputed from its
inputs and diffed against its snapshot) are timed one after the other in one process. Medians of --repeat
rounds; `engines` counts the views' batches the driver and Spark computed; per view (with its helper views,
`<view>__scalar_1`, ...), the median milliseconds of its batches both ways; --profile prints the median phase
profile of the incremental batches, and the line of every batch that went to Spark.

    python benchmarks/star_schema.py --rows 10000000 --changes 10000 100000 --repeat 3 --profile

With --continuous K, after the bootstrap, `mv refresh --continuous --interval 0.1s` runs over the project in a
child process instead, and K commits of Spark SQL each UPDATE one sale: for each, the time from its commit to
the commit of the last view that reflects it (through the views it reads), from the Delta logs.

    python benchmarks/star_schema.py --rows 10000000 --continuous 30
"""

from __future__ import annotations

import argparse
import statistics
import time

from bench_project import SideBySide, bench_refresher, spark_changes  # benchmarks/bench_project.py
from continuous import reflected_at, refreshing  # benchmarks/continuous.py

from mvengine.project.layout import source_table
from mvengine.runtime.session import spark_session
from mvengine.storage.tables import commit_metadata

SQL = """
CREATE TABLE sales (
  id BIGINT NOT NULL, sold_on DATE, ts TIMESTAMP, customer BIGINT, product BIGINT, store BIGINT, quantity INT,
  price DECIMAL(12,2), amount DECIMAL(12,2), PRIMARY KEY (id) NOT ENFORCED
);
CREATE TABLE customers (
  id BIGINT NOT NULL, name STRING, segment STRING, country STRING, PRIMARY KEY (id) NOT ENFORCED
);
CREATE TABLE products (
  id BIGINT NOT NULL, name STRING, category STRING, brand STRING, list_price DECIMAL(12,2),
  PRIMARY KEY (id) NOT ENFORCED
);
CREATE TABLE stores (id BIGINT NOT NULL, city STRING, region STRING, PRIMARY KEY (id) NOT ENFORCED);

CREATE MATERIALIZED VIEW region_daily AS
SELECT st.region, CAST(s.ts AS DATE) AS day, SUM(s.amount) AS revenue, COUNT(*) AS sales
FROM sales s JOIN stores st ON s.store = st.id
GROUP BY st.region, CAST(s.ts AS DATE);

CREATE MATERIALIZED VIEW category_month AS
SELECT p.category, c.segment, st.region, YEAR(s.sold_on) AS year, MONTH(s.sold_on) AS month,
       SUM(s.amount) AS revenue, SUM(s.quantity) AS units, AVG(s.price) AS avg_price
FROM sales s, customers c, products p, stores st
WHERE s.product = p.id AND s.customer = c.id AND s.store = st.id
GROUP BY p.category, c.segment, st.region, YEAR(s.sold_on), MONTH(s.sold_on);

CREATE MATERIALIZED VIEW product_revenue AS
SELECT p.category, p.id AS product, p.name, SUM(s.amount) AS revenue, COUNT(*) AS sales
FROM sales s JOIN products p ON s.product = p.id
GROUP BY p.category, p.id, p.name;

CREATE MATERIALIZED VIEW top_products AS
SELECT * FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY category ORDER BY revenue DESC, product) AS place
  FROM product_revenue) AS ranked
WHERE place <= 5;

CREATE MATERIALIZED VIEW small_quantity_revenue AS
SELECT p.brand, SUM(s.amount) AS revenue, SUM(s.amount) / 7 AS per_day
FROM sales s JOIN products p ON s.product = p.id
WHERE p.category = 'category 3'
  AND s.quantity < (SELECT 0.5 * AVG(s2.quantity) FROM sales s2 WHERE s2.product = p.id)
GROUP BY p.brand;

CREATE MATERIALIZED VIEW premium_sales AS
SELECT st.region, SUM(s.amount) AS revenue, COUNT(*) AS sales
FROM sales s JOIN products p ON s.product = p.id JOIN stores st ON s.store = st.id
WHERE p.list_price > (SELECT 1.8 * AVG(list_price) FROM products)
GROUP BY st.region;

CREATE MATERIALIZED VIEW big_buyers AS
SELECT c.country, c.segment, COUNT(*) AS customers
FROM customers c
WHERE EXISTS (SELECT 1 FROM sales s WHERE s.customer = c.id AND s.amount > 995.00)
GROUP BY c.country, c.segment;

CREATE MATERIALIZED VIEW unsold_products AS
SELECT p.category, COUNT(*) AS products
FROM products p
WHERE p.id NOT IN (SELECT s.product FROM sales s WHERE s.quantity = 10 AND s.store < 20)
GROUP BY p.category;

CREATE MATERIALIZED VIEW march_discounts AS
SELECT s.store, SUM(s.price * s.quantity - s.amount) AS discount, COUNT(*) AS sales
FROM sales s
WHERE s.sold_on BETWEEN DATE '2026-03-01' AND DATE '2026-03-31' AND s.quantity >= 5
GROUP BY s.store;
"""
VIEWS = [
    "region_daily",
    "category_month",
    "product_revenue",
    "top_products",
    "small_quantity_revenue",
    "premium_sales",
    "big_buyers",
    "unsold_products",
    "march_discounts",
]
STORES = 200

# One sale of id `id`: a day of 2026 and a moment in it, its customer, product and store, a quantity of 1 to 10,
# a price of 1.00 to 500.00, and an amount of price * quantity less a discount of up to 9%.
SALE = (
    "id, DATE '2026-01-01' + CAST(id * 37 % 365 AS INT) AS sold_on, "
    "TIMESTAMP '2026-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id * 7919 % 31536000) AS ts, "
    "id * 31 % {customers} AS customer, id * 17 % {products} AS product, id * 13 % {stores} AS store, "
    "CAST(1 + id * 7 % 10 AS INT) AS quantity, "
    "CAST(1 + id * 101 % 49900 / 100 AS DECIMAL(12,2)) AS price, "
    "CAST((1 + id * 101 % 49900 / 100) * (1 + id * 7 % 10) * (100 - id % 10) / 100 / 10 AS DECIMAL(12,2)) "
    "AS amount"
)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=10_000_000, help="sales (the dimensions scale with it)")
    parser.add_argument(
        "--changes", type=int, nargs="+", default=[10_000, 100_000], help="sales changed per round"
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--profile", action="store_true", help="the median phase profile of each size's batches"
    )
    parser.add_argument(
        "--continuous", type=int, metavar="K", help="K one-row commits to a `--continuous` refresh instead"
    )
    parser.add_argument("--log", help="with --continuous: the refresh's output, with every batch's phases")
    parser.add_argument(
        "--driver-max-changes",
        type=int,
        help="[refresh] driver_max_changes of the project (0: every batch in Spark; default: mvengine's)",
    )
    args = parser.parse_args()
    spark = spark_session(master=args.master)
    conf = None
    if args.driver_max_changes is not None:
        conf = f"[refresh]\ndriver_max_changes = {args.driver_max_changes}\n"
    catalog, refresher, batches = bench_refresher(spark, SQL, conf)
    paths = {name: catalog.sources[name].path for name in ("sales", "customers", "products", "stores")}
    n = args.rows
    sizes = {"customers": max(n // 100, 1), "products": max(n // 1000, 1), "stores": STORES}
    sale = SALE.format(**sizes)
    started = time.monotonic()
    for path in paths.values():  # made by prepare_sources; Spark turns deletion vectors on
        spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    spark.sql(f"INSERT INTO delta.`{paths['sales']}` SELECT {sale} FROM range({n})")
    spark.sql(
        f"INSERT INTO delta.`{paths['customers']}` SELECT id, CONCAT('customer ', id), "
        f"CONCAT('segment ', id % 5), CONCAT('country ', id % 25) FROM range({sizes['customers']})"
    )
    spark.sql(
        f"INSERT INTO delta.`{paths['products']}` SELECT id, CONCAT('product ', id), "
        f"CONCAT('category ', id % 20), CONCAT('brand ', id % 50), "
        f"CAST(1 + id * 7919 % 99900 / 100 AS DECIMAL(12,2)) FROM range({sizes['products']})"
    )
    spark.sql(
        f"INSERT INTO delta.`{paths['stores']}` SELECT id, CONCAT('city ', id), CONCAT('region ', id % 8) "
        f"FROM range({STORES})"
    )
    print(f"sources written by Spark: {time.monotonic() - started:.1f} s", flush=True)
    started = time.monotonic()
    refresher.refresh()
    print(f"bootstrap of {len(VIEWS)} views over {n} sales: {time.monotonic() - started:.1f} s", flush=True)
    if args.continuous:
        one_row_latencies(spark, refresher, paths["sales"], args.continuous, args.log)
        return
    print(f"{'changed':>8} {'incremental s':>14} {'full s':>7} {'full/incr':>10}  engines", flush=True)
    next_id = n
    for changed in args.changes:
        side = SideBySide(refresher, batches, VIEWS)
        for r in range(args.repeat):
            next_id = spark_changes(
                spark,
                paths["sales"],
                changed,
                r,
                n,
                next_id,
                "amount = amount + 1.25, quantity = quantity % 10 + 1",
                lambda first, last: f"SELECT {sale} FROM range({first}, {last})",
            )
            side.round()
        side.print(changed, profile=args.profile)


def one_row_latencies(spark, refresher, sales: str, commits: int, log: str | None) -> None:
    """From each one-row commit to sales to the last view's commit that reflects it, under --continuous."""
    config, catalog = refresher.config, refresher.catalog
    ref = source_table(catalog.sources["sales"], {})
    with refreshing(config.project_dir, log):
        for view in VIEWS:  # the child's Spark starts, and it catches up with the bootstrap
            reflected_at(config, catalog, view, "sales", ref.open().version(), timeout=600)
        latencies = []
        for i in range(commits):
            spark.sql(f"UPDATE delta.`{sales}` SET amount = amount + 0.01 WHERE id = {i * 7919 % 1_000_000}")
            version = ref.open().version()
            committed = int(commit_metadata(ref.open(), version)["timestamp"])
            last = max(reflected_at(config, catalog, view, "sales", version, timeout=300) for view in VIEWS)
            latencies.append((last - committed) / 1000)
            print(f"commit {i + 1:>3}: sales@{version} in every view after {latencies[-1]:.2f} s", flush=True)
    p95 = statistics.quantiles(latencies, n=20)[-1] if len(latencies) > 1 else latencies[0]
    print(
        f"\n{len(latencies)} one-row commits, every view: p50 {statistics.median(latencies):.2f} s, "
        f"p95 {p95:.2f} s, max {max(latencies):.2f} s",
        flush=True,
    )


if __name__ == "__main__":
    main()
