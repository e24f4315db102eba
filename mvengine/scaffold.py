"""`mv init DIR`: a new project with every setting written out (commented, at its default), one source, one
view and a .gitignore for the warehouse."""

from __future__ import annotations

from pathlib import Path

from mvengine.errors import MvError

CONFIG = """\
# mvengine settings. Every key is optional: the values shown (commented out) are the defaults.

[project]
# Where source tables (under sources/) and every view's tables live: a folder relative to the project,
# an absolute path, or an object-store URI such as s3://bucket/warehouse.
# warehouse = "warehouse"

[spark]
# Any Spark master URL: local[*], local[2], spark://host:7077, ... On a cluster, every executor needs the
# driver's Python version with mvengine and its dependencies installed.
# master = "local[*]"
# Level of Spark's own logging: ERROR, WARN or INFO.
# log_level = "ERROR"

[spark.conf]
# Any Spark setting, applied over mvengine's defaults (4 shuffle partitions, UI off, UTC session time zone).
# "spark.sql.shuffle.partitions" = "4"
# "spark.driver.memory" = "4g"

[storage.options]
# delta-rs object-store options, e.g. for S3. Write secrets as "${ENV_VAR}" to keep them out of this file;
# values of keys that look like secrets are never printed.
# AWS_REGION = "eu-west-1"
# AWS_SECRET_ACCESS_KEY = "${AWS_SECRET_ACCESS_KEY}"

[refresh]
# How often `mv refresh --continuous` looks for new input commits: 500ms, 1s, 2m, 1h.
# interval = "1s"
# A view under refresh_policy 'auto' is recomputed instead of maintained in a batch that changes more than this
# share of its inputs' rows (recompute_above_in_spark: a batch too large for the driver), and at least
# recompute_min_changes rows.
# recompute_above = 0.8
# recompute_above_in_spark = 0.1
# recompute_min_changes = 100000
# A batch whose inputs changed by at most this many rows is computed on the driver, without Spark, when the
# view's expressions allow it (mv plan says whether they do).
# driver_max_changes = 2000000

[plan]
# true: a view whose state grows without bound is an error (see `mv plan`).
# require_bounded_state = false
"""

SOURCES = """\
-- Sources: Delta tables that other programs write; mvengine reads their change data feed.
-- `mv sources --create` creates the missing ones, empty.
CREATE TABLE orders (
  order_id BIGINT NOT NULL,
  customer STRING,
  amount   DECIMAL(10, 2),
  placed   TIMESTAMP,
  PRIMARY KEY (order_id) NOT ENFORCED
);
"""

VIEW = """\
-- A grouped aggregate over the orders: one row per customer, kept fresh incrementally.
-- `mv plan` shows how it is maintained; `mv changes customer_totals` shows each change it went through.
CREATE MATERIALIZED VIEW customer_totals AS
SELECT customer, COUNT(*) AS orders, SUM(amount) AS total
FROM orders
GROUP BY customer;
"""

GITIGNORE = """\
# mvengine's tables (sources and views) and Spark's local files
/warehouse/
spark-warehouse/
metastore_db/
derby.log
"""

ORDERS = """\
order_id,customer,amount,placed
1,ada,12.50,2026-11-25 09:00:00
2,bob,7.00,2026-11-25 09:05:00
3,ada,30.25,2026-11-25 09:12:00
"""

FILES = {
    "conf/mvengine.toml": CONFIG,
    "views/sources.sql": SOURCES,
    "views/customer_totals.sql": VIEW,
    "data/orders.csv": ORDERS,
    ".gitignore": GITIGNORE,
}


def init_project(folder: str | Path) -> list[Path]:
    """Write the new project's files; refuses, writing nothing, where a project (or any of its files) is."""
    root = Path(folder)
    if root.exists() and not root.is_dir():
        raise MvError(f"{root} is a file, not a folder", hint="give mv init the name of a new folder")
    existing = [
        name for name in ("conf/mvengine.toml", "views", "data", ".gitignore") if (root / name).exists()
    ]
    if existing:
        raise MvError(
            f"{root} already holds {', '.join(existing)}: mv init writes new projects only, and wrote "
            "nothing",
            hint="pick a new folder, or edit the existing files",
        )
    written = []
    for name, text in FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


NEXT_STEPS = [
    ("mv plan", "how each view will be maintained (no Spark needed)"),
    (
        "mv load orders data/orders.csv",
        "put rows into the source (CSV, JSON lines, Parquet; --upsert by key)",
    ),
    ("mv refresh", "build the view (then again after each load: it applies just the new rows)"),
    ('mv query "SELECT * FROM customer_totals"', "read it (add VERSION AS OF n for an older version)"),
]
