"""Incremental refresh against full recomputation on tables as a Spark shop has them (issue 42).

Sources written by Spark SQL with deletion vectors and the change data feed on: orders(id, customer, amount
DECIMAL(12,2), ts TIMESTAMP) of N rows and customers(id, name, country) of N/40 rows. Four ordinary views:
    daily_revenue  revenue per customer per day: GROUP BY customer, CAST(ts AS DATE), SUM(amount), COUNT(*)
    big_orders     orders over 100.00 joined to their customer
    country_totals a view over big_orders: SUM(amount) and COUNT(*) per country
    top_customers  the top 3 customers of each country by revenue (ROW_NUMBER over a per-customer aggregate)
Each round changes C orders with Spark SQL, through deletion vectors: an UPDATE of C/2 amounts, a DELETE of C/4
orders and a MERGE that inserts C/4 new ones. Then `refresh()` (incremental) and `refresh(full=True)`
(recomputed from the inputs and diffed against the snapshot) are timed one after the other in one process.
Medians of --repeat rounds; `engines` counts the views' batches the driver and Spark computed.

    python benchmarks/real_tables.py --rows 200000 --changes 1 1300 --repeat 3 --profile
"""

from __future__ import annotations

import argparse
import time

from bench_project import SideBySide, bench_refresher, spark_changes  # benchmarks/bench_project.py

from mvengine.runtime.session import spark_session

SQL = """
CREATE TABLE orders (
  id BIGINT NOT NULL, customer BIGINT, amount DECIMAL(12,2), ts TIMESTAMP, PRIMARY KEY (id) NOT ENFORCED
);
CREATE TABLE customers (id BIGINT NOT NULL, name STRING, country STRING, PRIMARY KEY (id) NOT ENFORCED);
CREATE MATERIALIZED VIEW daily_revenue AS
SELECT customer, CAST(ts AS DATE) AS day, SUM(amount) AS revenue, COUNT(*) AS orders
FROM orders GROUP BY customer, CAST(ts AS DATE);
CREATE MATERIALIZED VIEW big_orders AS
SELECT o.id, o.amount, c.name, c.country FROM orders o JOIN customers c ON o.customer = c.id
WHERE o.amount > 100.00;
CREATE MATERIALIZED VIEW country_totals AS
SELECT country, SUM(amount) AS amount, COUNT(*) AS n FROM big_orders GROUP BY country;
CREATE MATERIALIZED VIEW customer_revenue AS
SELECT c.country, c.name, SUM(o.amount) AS revenue
FROM orders o JOIN customers c ON o.customer = c.id GROUP BY c.country, c.name;
CREATE MATERIALIZED VIEW top_customers AS
SELECT * FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY country ORDER BY revenue DESC, name) AS place
  FROM customer_revenue) AS ranked
WHERE place <= 3;
"""
VIEWS = ["daily_revenue", "big_orders", "country_totals", "customer_revenue", "top_customers"]
COUNTRIES = 20


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=200_000, help="orders (customers: a fortieth of them)")
    parser.add_argument("--changes", type=int, nargs="+", default=[1, 1300], help="orders changed per round")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--profile", action="store_true", help="the median phase profile of each size's batches"
    )
    args = parser.parse_args()
    spark = spark_session(master=args.master)
    catalog, refresher, batches = bench_refresher(spark, SQL)
    orders, customers = catalog.sources["orders"].path, catalog.sources["customers"].path
    n, people = args.rows, max(args.rows // 40, 1)
    for path in (orders, customers):  # made by prepare_sources; Spark turns deletion vectors on
        spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    spark.sql(
        f"INSERT INTO delta.`{orders}` SELECT id, id % {people}, CAST((id * 7919) % 50000 / 100 AS DECIMAL(12,2)), "
        f"TIMESTAMP '2026-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id * 37 % 31536000) FROM range({n})"
    )
    spark.sql(
        f"INSERT INTO delta.`{customers}` SELECT id, CONCAT('customer ', id), CONCAT('country ', id % {COUNTRIES}) "
        f"FROM range({people})"
    )
    started = time.monotonic()
    refresher.refresh()
    print(f"bootstrap of {len(VIEWS)} views over {n} orders: {time.monotonic() - started:.1f} s", flush=True)
    print(f"{'changed':>8} {'incremental s':>14} {'full s':>7} {'full/incr':>10}  engines", flush=True)
    next_id = n
    for changed in args.changes:
        side = SideBySide(refresher, batches, VIEWS)
        for r in range(args.repeat):
            next_id = spark_changes(
                spark,
                orders,
                changed,
                r,
                n,
                next_id,
                "amount = amount + 1.25",
                lambda first, last: (
                    f"SELECT id, id % {people} AS customer, CAST(id % 500 AS DECIMAL(12,2)) AS amount, "
                    f"TIMESTAMP '2026-06-01 12:00:00' AS ts FROM range({first}, {last})"
                ),
            )
            side.round()
        side.print(changed, profile=args.profile)


if __name__ == "__main__":
    main()
