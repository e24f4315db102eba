"""`mv init DIR`: a new project with every setting written out (commented, at its default), one source, one
view and a .gitignore for the warehouse."""

from __future__ import annotations

import textwrap
from pathlib import Path

from mvengine.config import SETTINGS
from mvengine.errors import MvError


def _config_file() -> str:
    """conf/mvengine.toml with every setting of config.SETTINGS written out, commented, at its default."""
    lines = ["# mvengine settings. Every key is optional: the values shown (commented out) are the defaults."]
    for section in dict.fromkeys(s.section for s in SETTINGS):
        plain = [s for s in SETTINGS if s.section == section and not s.is_table]
        if plain:
            lines += ["", f"[{section}]"]
        for setting in plain:
            lines += [f"# {line}" for line in textwrap.wrap(setting.meaning, 108)]
            lines.append(f"# {setting.key} = {setting.default}")
        for table in (s for s in SETTINGS if s.section == section and s.is_table):
            lines += ["", f"[{section}.{table.key}]"]
            lines += [f"# {line}" for line in textwrap.wrap(table.meaning, 108)]
            lines += [f"# {example}" for example in table.examples]
    return "\n".join(lines) + "\n"


CONFIG = _config_file()

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
