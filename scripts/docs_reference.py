"""The reference pages of the docs site (docs/reference/), made from the code so they cannot drift from it:

- cli.md: every command's `--help`, from the argument parser (cli/main.py build_parser);
- config.md: every key of conf/mvengine.toml, from the config model (config.SETTINGS);
- sql.md: what each SQL construct becomes (incremental, on the driver or not, recomputed, refused, and why),
  from the planner itself over an example of each, then the operator registry and the WITH options;
- tables.md: the table layout, the changelog's columns and the commit metadata keys, from the names the
  runtime writes (names.CHANGELOG_COLUMN_MEANINGS, layout.COMMIT_METADATA);
- json.md: the fields of `mv plan --json`, `mv describe --json` and `mv status --json`, from the field lists
  beside the code that makes each document (tests check the documents have exactly those fields).

`python scripts/docs_reference.py` writes them; `--check` writes nothing and exits 1 naming every page that
differs from what the code makes now (`make docs` runs it before building the site).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import sys
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "docs" / "reference"
GENERATED = (
    "<!-- Made by scripts/docs_reference.py from the code: edit the code, then `make docs-reference`. -->"
)
HELP_WIDTH = "100"  # argparse wraps help at $COLUMNS: a fixed width keeps the page the same on every machine


def cli_page() -> str:
    from mvengine.cli.main import build_parser

    os.environ["COLUMNS"] = HELP_WIDTH
    parser = build_parser("mv")
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    out = [
        "# Command line",
        "",
        GENERATED,
        "",
        "Every command's `--help`, as `mv` prints it. `mvengine` is the same program under a name that never "
        "collides with the system's `mv` (the shim hands `mv a b` to the file-move command).",
        "",
        "## mv",
        "",
        "```text",
        parser.format_help().rstrip(),
        "```",
    ]
    for name, sub in commands.choices.items():
        out += ["", f"## mv {name}", "", "```text", sub.format_help().rstrip(), "```"]
    return "\n".join(out) + "\n"


def config_page() -> str:
    from mvengine.config import DEFAULT_SPARK_CONF, SETTINGS

    out = [
        "# Configuration",
        "",
        GENERATED,
        "",
        "`conf/mvengine.toml` in the project folder. Every key is optional; a missing file means every default. "
        "An unknown section or key is an error naming its line (a typo must not fall back to a default "
        "silently). `mv init` writes this file with every key commented out at its default.",
        "",
        "| key | type | default | meaning |",
        "|---|---|---|---|",
    ]
    for s in SETTINGS:
        name = f"`[{s.section}.{s.key}]`" if s.is_table else f"`[{s.section}] {s.key}`"
        default = s.default if not s.default.startswith(('"', "0", "1", "2", "f", "t")) else f"`{s.default}`"
        out.append(f"| {name} | {s.type} | {default} | {_cell(s.meaning)} |")
    out += [
        "",
        "## Spark settings mvengine sets",
        "",
        "`[spark.conf]` is applied over these:",
        "",
        "| setting | value |",
        "|---|---|",
    ]
    out += [f"| `{k}` | `{_code(v)}` |" for k, v in DEFAULT_SPARK_CONF.items()]
    out += ["", "## Examples", ""]
    for s in (s for s in SETTINGS if s.is_table):
        out += ["```toml", f"[{s.section}.{s.key}]", *s.examples, "```", ""]
    return "\n".join(out).rstrip() + "\n"


# One example of each SQL construct, over SOURCES: the planner says what becomes of it.
SOURCES = """\
CREATE TABLE orders (
  id BIGINT NOT NULL, customer_id BIGINT, qty INT, price DECIMAL(10, 2), status STRING, ts TIMESTAMP,
  PRIMARY KEY (id) NOT ENFORCED, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
);
CREATE TABLE customers (id BIGINT NOT NULL, name STRING, country STRING, PRIMARY KEY (id) NOT ENFORCED);
CREATE TABLE clicks (user_id BIGINT, url STRING, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE)
WITH ('append_only' = 'true');
CREATE TABLE prices (customer_id BIGINT, factor DOUBLE, ts TIMESTAMP, WATERMARK FOR ts AS ts)
WITH ('append_only' = 'true');
CREATE TABLE baskets (id BIGINT NOT NULL, items ARRAY<STRING>, PRIMARY KEY (id) NOT ENFORCED);
"""
CONSTRUCTS: list[tuple[str, str]] = [
    ("Filter and projection", "SELECT id, qty * price AS amount FROM orders WHERE status = 'open'"),
    (
        "GROUP BY with COUNT, SUM, AVG",
        "SELECT customer_id, COUNT(*) AS n, SUM(price) AS total, AVG(qty) AS q FROM orders GROUP BY customer_id",
    ),
    ("MIN / MAX over a table that deletes", "SELECT status, MAX(price) AS top FROM orders GROUP BY status"),
    ("MIN / MAX over an append-only table", "SELECT url, MAX(ts) AS last_seen FROM clicks GROUP BY url"),
    (
        "COUNT(DISTINCT ...)",
        "SELECT status, COUNT(DISTINCT customer_id) AS buyers FROM orders GROUP BY status",
    ),
    ("Aggregate without GROUP BY", "SELECT COUNT(*) AS n, SUM(qty) AS q FROM orders"),
    (
        "HAVING",
        "SELECT customer_id, SUM(qty) AS q FROM orders GROUP BY customer_id HAVING SUM(qty) > 10",
    ),
    (
        "VARIANCE, STDDEV",
        "SELECT status, STDDEV(price) AS sd, VARIANCE(qty) AS v FROM orders GROUP BY status",
    ),
    (
        "COLLECT_LIST, COUNT_IF, BOOL_AND, aggregates with FILTER",
        "SELECT status, COLLECT_LIST(id) AS ids, COUNT(*) FILTER (WHERE qty > 1) AS many FROM orders GROUP BY status",
    ),
    (
        "FIRST / LAST over an append-only table",
        "SELECT user_id, FIRST(url) AS first_url FROM clicks GROUP BY user_id",
    ),
    (
        "FIRST / LAST over a table that deletes",
        "SELECT status, LAST(id) AS last_id FROM orders GROUP BY status",
    ),
    (
        "PERCENTILE_APPROX, MAX_BY and other aggregates",
        "SELECT status, PERCENTILE_APPROX(price, 0.5) AS median FROM orders GROUP BY status",
    ),
    ("DISTINCT", "SELECT DISTINCT country FROM customers"),
    ("UNION ALL", "SELECT id FROM orders UNION ALL SELECT id FROM customers"),
    ("UNION (distinct)", "SELECT customer_id FROM orders UNION SELECT id FROM customers"),
    ("INTERSECT / EXCEPT", "SELECT id FROM orders INTERSECT SELECT id FROM customers"),
    (
        "Inner equi-join",
        "SELECT o.id, c.name FROM orders o JOIN customers c ON o.customer_id = c.id",
    ),
    (
        "LEFT / RIGHT / FULL OUTER join",
        "SELECT o.id, c.name FROM orders o LEFT JOIN customers c ON o.customer_id = c.id",
    ),
    (
        "EXISTS / IN (semi join)",
        "SELECT id, name FROM customers c WHERE EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.id)",
    ),
    (
        "NOT EXISTS (anti join)",
        "SELECT id FROM customers c WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.id)",
    ),
    ("NOT IN (subquery)", "SELECT id FROM customers WHERE id NOT IN (SELECT customer_id FROM orders)"),
    (
        "Semi join whose ON compares the sides other than by equality",
        "SELECT id FROM customers c LEFT SEMI JOIN orders o ON o.customer_id = c.id AND o.qty > c.id",
    ),
    ("CROSS JOIN", "SELECT c.id, o.id AS order_id FROM customers c CROSS JOIN orders o"),
    (
        "Scalar subquery",
        "SELECT id, price - (SELECT AVG(price) FROM orders) AS above_average FROM orders",
    ),
    (
        "Correlated scalar subquery in WHERE",
        "SELECT o.id FROM orders o "
        "WHERE o.qty > (SELECT AVG(o2.qty) FROM orders o2 WHERE o2.customer_id = o.customer_id)",
    ),
    (
        "Subquery in FROM that aggregates, joined",
        "SELECT c.name, t.total FROM customers c "
        "JOIN (SELECT customer_id, SUM(price) AS total FROM orders GROUP BY customer_id) t ON t.customer_id = c.id",
    ),
    (
        "Top-N per group (ROW_NUMBER ... <= N)",
        "SELECT customer_id, id FROM (SELECT customer_id, id, ROW_NUMBER() OVER "
        "(PARTITION BY customer_id ORDER BY price DESC) AS rn FROM orders) WHERE rn <= 3",
    ),
    (
        "Deduplication (ROW_NUMBER ... = 1)",
        "SELECT user_id, url FROM (SELECT user_id, url, ROW_NUMBER() OVER "
        "(PARTITION BY user_id ORDER BY ts DESC) AS rn FROM clicks) WHERE rn = 1",
    ),
    (
        "QUALIFY",
        "SELECT user_id, url FROM clicks QUALIFY ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY ts DESC) = 1",
    ),
    ("ORDER BY ... LIMIT", "SELECT id, price FROM orders ORDER BY price DESC LIMIT 10"),
    ("LIMIT without ORDER BY", "SELECT id FROM orders LIMIT 5"),
    ("OFFSET", "SELECT id FROM orders ORDER BY id LIMIT 5 OFFSET 5"),
    (
        "Window function with PARTITION BY",
        "SELECT id, SUM(qty) OVER (PARTITION BY customer_id ORDER BY ts) AS running FROM orders",
    ),
    ("Window function without PARTITION BY", "SELECT id, COUNT(*) OVER () AS n FROM orders"),
    (
        "Window functions over different partitions",
        "SELECT id, COUNT(*) OVER (PARTITION BY customer_id) AS a, COUNT(*) OVER (PARTITION BY status) AS b "
        "FROM orders",
    ),
    (
        "Tumbling / hopping window",
        "SELECT url, window.start, COUNT(*) AS n FROM clicks GROUP BY url, window(ts, '1 minute')",
    ),
    (
        "Window table-valued function",
        "SELECT user_id, window_start, COUNT(*) AS n FROM TABLE(HOP(TABLE clicks, DESCRIPTOR(ts), "
        "INTERVAL '1' MINUTE, INTERVAL '5' MINUTE)) GROUP BY user_id, window_start, window_end",
    ),
    (
        "Session window",
        "SELECT user_id, session_window.start AS s, COUNT(*) AS n FROM clicks "
        "GROUP BY user_id, session_window(ts, '30 minutes')",
    ),
    (
        "EMIT (when a window's rows appear)",
        "SELECT user_id, window_start, window_end, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), "
        "INTERVAL '1' MINUTE)) GROUP BY user_id, window_start, window_end EMIT WHEN WATERMARK PAST window_end",
    ),
    (
        "Interval join",
        "SELECT c.url, p.factor FROM clicks c JOIN prices p ON p.customer_id = c.user_id "
        "AND p.ts BETWEEN c.ts - INTERVAL '1' HOUR AND c.ts",
    ),
    (
        "Temporal join (FOR SYSTEM_TIME AS OF a time column)",
        "SELECT c.url, p.factor FROM clicks c "
        "JOIN prices FOR SYSTEM_TIME AS OF c.ts AS p ON p.customer_id = c.user_id",
    ),
    (
        "Lookup join (FOR SYSTEM_TIME AS OF PROCTIME())",
        "SELECT c.url, u.name FROM clicks c "
        "JOIN customers FOR SYSTEM_TIME AS OF PROCTIME() AS u ON u.id = c.user_id",
    ),
    (
        "Temporal filter (NOW())",
        "SELECT customer_id, COUNT(*) AS n FROM orders WHERE ts > NOW() - INTERVAL '1' HOUR GROUP BY customer_id",
    ),
    ("Non-deterministic function", "SELECT id, rand() AS r FROM orders"),
    (
        "PROCTIME() over a table that deletes",
        "SELECT o.id, p FROM (SELECT id, PROCTIME() AS p FROM orders) AS o",
    ),
    (
        "GROUP BY ROLLUP / CUBE",
        "SELECT country, name, COUNT(*) AS n FROM customers GROUP BY ROLLUP (country, name)",
    ),
    ("LATERAL VIEW explode", "SELECT b.id, t.item FROM baskets b LATERAL VIEW explode(items) t AS item"),
    ("Aggregate in WHERE", "SELECT id FROM orders WHERE SUM(qty) > 1"),
]
REFUSED_STATEMENTS: list[tuple[str, str]] = [
    ("CREATE VIEW (not MATERIALIZED)", "CREATE VIEW v AS SELECT id FROM orders;"),
    ("INSERT, UPDATE, DELETE", "INSERT INTO orders SELECT * FROM orders;"),
]


def sql_page() -> str:
    from mvengine.plan.operators import operator_summaries, operators
    from mvengine.sql.sources import SOURCE_OPTIONS
    from mvengine.sql.views import VIEW_OPTIONS

    out = [
        "# SQL support",
        "",
        GENERATED,
        "",
        "What mvengine makes of each construct, as the planner answers for one example of it (the same answer "
        "`mv plan` gives for your views). **incremental**: maintained by its delta rule from the inputs' "
        "changes; **driver**: whether a small batch of it is computed on the driver, in Arrow, without Spark; "
        "**full**: recomputed when an input moves, with the planner's reason; **refused**: an error at the "
        "view, with what to write instead. A construct inside a larger query takes the whole view to full "
        "refresh when it is full.",
        "",
        "## Constructs",
        "",
        "The examples read these sources:",
        "",
        "```sql",
        SOURCES.rstrip(),
        "```",
        "",
        "| construct | example | maintained | driver | why |",
        "|---|---|---|---|---|",
    ]
    for construct, sql in CONSTRUCTS:
        verdict, driver, why = _planned(f"CREATE MATERIALIZED VIEW v AS\n{sql};\n")
        out.append(f"| {construct} | `{_code(sql)}` | {verdict} | {driver} | {_cell(why)} |")
    for construct, statement in REFUSED_STATEMENTS:
        verdict, _, why = _planned(statement)
        out.append(f"| {construct} | `{_code(statement.rstrip(';'))}` | {verdict} | - | {_cell(why)} |")
    out += [
        "",
        "## Operators",
        "",
        "Each plan node is maintained by one operator (`mvengine/plan/operators/`), whose delta rule "
        "(`mvengine/incremental/`) runs on both engines when it runs on the driver at all.",
        "",
        "| node | delta rule | on the driver | what it does |",
        "|---|---|---|---|",
    ]
    summaries = operator_summaries()
    for node, operator in operators().items():
        summary = summaries[node]
        out.append(
            f"| `{node.__name__}` | {_yes(operator.incremental)} | {_yes(operator.on_driver)} | {_cell(summary)} |"
        )
    out += ["", "## WITH options of a view", "", *_table("option", VIEW_OPTIONS)]
    out += ["", "## WITH options of a source", "", *_table("option", SOURCE_OPTIONS)]
    return "\n".join(out) + "\n"


def _planned(statement: str) -> tuple[str, str, str]:
    """What the planner makes of a view file holding `statement`, over SOURCES: (verdict, driver, why)."""
    from mvengine.config import load_config
    from mvengine.errors import MvError
    from mvengine.project.catalog import load_catalog
    from mvengine.reading.explain import driver_fields

    with tempfile.TemporaryDirectory() as folder:
        views = Path(folder, "views")
        views.mkdir()
        (views / "sources.sql").write_text(SOURCES, encoding="utf-8")
        (views / "v.sql").write_text(statement, encoding="utf-8")
        try:
            plan = load_catalog(load_config(folder)).plans["v"]
        except MvError as e:
            first = e.message.splitlines()[0]
            why = re.sub(r"^views/v\.sql(:\d+)*:( view v:)? ", "", first)
            return "refused", "-", why + (f" ({e.hint})" if e.hint else "")
    if plan.strategy == "full":
        return "full", "no", plan.reason or ""
    driver = driver_fields(plan)
    return "incremental", "yes" if driver["driver"] else "no", driver["driver_reason"] or ""


def tables_page() -> str:
    from mvengine.names import CHANGELOG_COLUMN_MEANINGS
    from mvengine.project.layout import COMMIT_METADATA
    from mvengine.runtime.expiry import CLOCK
    from mvengine.runtime.lock import RECORD_KEY

    out = [
        "# Tables and commit metadata",
        "",
        GENERATED,
        "",
        "Every view keeps its tables under `<warehouse>/<view>/` (or its `path`); all are plain Delta tables "
        "that any Delta reader opens.",
        "",
        "| folder | what it is |",
        "|---|---|",
        "| `snapshot/` | the view's rows (its columns only), with the change data feed on: query it AS OF any "
        "version or time |",
        "| `changelog/` | append-only: the view's columns, then the columns below, one row per change |",
        "| `_state/` | what the delta rules keep, as Delta tables: per group accumulators (`n<i>_acc`), value "
        "multisets for MIN/MAX over inputs that delete and for DISTINCT aggregates (`n<i>_ms<j>`), row counts of "
        "DISTINCT (`n<i>_rows`), the prefix and row count of each top-N partition (`n<i>_top`, `n<i>_count`), "
        "the input rows of window-function and session partitions (`n<i>_rows`), a row per partition of the "
        "running values of the rows running windows folded behind the late cutoff (`n<i>_carry`), and the "
        "revision of every key (`emit`) |",
        "| `late/` | rows set aside as too late for a windowed view (allowed_lateness) |",
        "| `quarantine/` | the view's rows its QUARANTINE expectations refused |",
        "",
        "A source's rows that its QUARANTINE expectations refused are kept in `<warehouse>/_quarantine/<source>` "
        "(the source's own table stays as written). `<warehouse>/_pipeline/` holds the record of the pipeline "
        "batch under way (`cut.json`), the checkpoint of `--continuous`'s streaming query (`query/`) and the "
        "refresh lock (`lock`), and where the catalog tables the views read by name are and which views are "
        "registered in Spark's catalog (`catalog.json`). On a local warehouse, `<warehouse>/_catalog/` holds "
        "the default catalog's embedded Derby metastore and its log, and Spark puts the folders of its "
        "schemas beside the views (`sales.db/` with its managed tables, an empty `mv.db/`): see "
        "[Spark's catalog](../guides/catalog.md).",
        "",
        "## Changelog columns",
        "",
        *_table("column", CHANGELOG_COLUMN_MEANINGS),
        "",
        "## Commit metadata of a snapshot version",
        "",
        "Each commit of a view's snapshot records, as Delta commit metadata (`commitInfo`):",
        "",
        *_table("key", {f"mvengine.{k}": v for k, v in COMMIT_METADATA.items()}),
        "",
        "A state table's commits record `mvengine.batch_id`, and with a state_ttl or a temporal filter "
        f"`{CLOCK}` (the batch clock, µs since the epoch). The lock's commits record `{RECORD_KEY}` (who "
        "holds the refresh, and until when).",
    ]
    return "\n".join(out) + "\n"


def json_page() -> str:
    from mvengine.reading.describe import DESCRIBE_SOURCE_FIELDS, DESCRIBE_VIEW_FIELDS
    from mvengine.reading.explain import PLAN_FIELDS
    from mvengine.reading.status import STATUS_FIELDS

    out = ["# JSON output", "", GENERATED, ""]
    out += [
        "`--json` makes a command print one JSON document, for scripts. Its fields are stable; a new field may "
        "be added, none is renamed or removed without a note in the changelog.",
    ]
    for title, intro, fields in (
        ("mv plan --json", "One document: the DAG's order, the sources, the views asked for.", PLAN_FIELDS),
        ("mv describe VIEW --json", "One document for a view.", DESCRIBE_VIEW_FIELDS),
        ("mv describe SOURCE --json", "One document for a source.", DESCRIBE_SOURCE_FIELDS),
        ("mv status --json", "A list: one entry per source, then per view in DAG order.", STATUS_FIELDS),
    ):
        out += ["", f"## `{title}`", "", intro, "", *_table("field", fields)]
    return "\n".join(out) + "\n"


def _table(name: str, meanings: dict[str, str]) -> list[str]:
    """A Markdown table of names (as code) and their meanings."""
    return [f"| {name} | meaning |", "|---|---|", *(f"| `{k}` | {_cell(v)} |" for k, v in meanings.items())]


def _cell(text: str) -> str:
    """Text for a Markdown table cell: one line, pipes escaped, `<name>` shown as written (not taken for HTML)."""
    return _code(text).replace("<", "&lt;").replace(">", "&gt;")


def _code(text: str) -> str:
    """Code for a Markdown table cell (in backticks): one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


PAGES: dict[str, Callable[[], str]] = {
    "cli.md": cli_page,
    "config.md": config_page,
    "sql.md": sql_page,
    "tables.md": tables_page,
    "json.md": json_page,
}


def generated() -> dict[Path, str]:
    """Every reference page as the code makes it now."""
    with contextlib.redirect_stdout(io.StringIO()):
        return {REFERENCE / name: make() for name, make in PAGES.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=textwrap.dedent(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a page is out of date")
    check = parser.parse_args(argv).check
    stale = []
    for path, text in generated().items():
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        stale.append(path.relative_to(ROOT))
        if not check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    if check and stale:
        print(
            "out of date with the code: "
            + ", ".join(map(str, stale))
            + "\n  hint: run `make docs-reference` "
            "and commit the pages",
            file=sys.stderr,
        )
        return 1
    for path in stale:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
