"""Planning views: unique keys, append-only inference, bounded state, DAG order, quoting of hostile names."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import exp

from mvengine.config import load_config
from mvengine.errors import SqlError
from mvengine.project.catalog import Catalog, load_catalog
from mvengine.reading.explain import describe

SOURCES = (Path(__file__).parent.parent / "plans" / "sources.sql").read_text()


def catalog(tmp_path: Path, views: str, config: str = "") -> Catalog:
    (tmp_path / "views").mkdir(exist_ok=True)
    (tmp_path / "views" / "sources.sql").write_text(SOURCES)
    (tmp_path / "views" / "views.sql").write_text(views)
    if config:
        (tmp_path / "conf").mkdir(exist_ok=True)
        (tmp_path / "conf" / "mvengine.toml").write_text(config)
    return load_catalog(load_config(tmp_path))


def plan(tmp_path: Path, select: str):
    return catalog(tmp_path, f"CREATE MATERIALIZED VIEW v AS {select};").plans["v"]


@pytest.mark.parametrize(
    "select, key",
    [
        ("SELECT id, name FROM customers WHERE country = 'NL'", ["id"]),
        ("SELECT id AS customer, name FROM customers", ["customer"]),
        ("SELECT name, country FROM customers", None),
        ("SELECT id + 1 AS id2 FROM customers", None),
        ("SELECT country, COUNT(*) AS n FROM customers GROUP BY country", ["country"]),
        ("SELECT UPPER(country) AS c, COUNT(*) AS n FROM customers GROUP BY 1", ["c"]),
        ("SELECT COUNT(*) AS n FROM customers GROUP BY country", None),
        ("SELECT COUNT(*) AS n, MAX(id) AS top FROM customers", []),
        ("SELECT DISTINCT country, name FROM customers", ["country", "name"]),
        ("SELECT DISTINCT id, name FROM customers", ["id"]),
        # orders.customer_id = customers.id covers the customers key: each order joins at most one customer.
        ("SELECT o.id, c.name FROM orders o JOIN customers c ON o.customer_id = c.id", ["id"]),
        ("SELECT o.id, c.name FROM customers c JOIN orders o ON o.customer_id = c.id", ["id"]),
        ("SELECT o.id, c.name FROM orders o LEFT JOIN customers c ON o.customer_id = c.id", ["id"]),
        ("SELECT o.id AS o, p.id AS p FROM orders o JOIN products p ON o.qty = p.price", ["o", "p"]),
        ("SELECT o.id AS o FROM orders o JOIN products p ON o.qty = p.price", None),
        (
            "SELECT o.id AS o, c.id AS c FROM orders o RIGHT JOIN customers c ON o.customer_id = c.id",
            ["o", "c"],
        ),
        (
            "SELECT id FROM customers c WHERE EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.id)",
            ["id"],
        ),
        ("SELECT id FROM customers UNION ALL SELECT id FROM products", None),
        ("SELECT id FROM customers UNION SELECT id FROM products", ["id"]),
        ("SELECT x.id FROM (SELECT id, name FROM customers WHERE name IS NOT NULL) AS x", ["id"]),
    ],
)
def test_unique_key_derivation(tmp_path, select, key):
    assert plan(tmp_path, select).to_json()["key"] == key


def test_key_is_carried_through_a_chain_of_views(tmp_path):
    plans = catalog(
        tmp_path,
        """
        CREATE MATERIALIZED VIEW a AS SELECT id, customer_id, qty FROM orders WHERE qty > 0;
        CREATE MATERIALIZED VIEW b AS SELECT id AS order_id, qty FROM a;
        CREATE MATERIALIZED VIEW c AS SELECT customer_id, SUM(qty) AS qty FROM a GROUP BY customer_id;
        CREATE MATERIALIZED VIEW d AS SELECT b.order_id, c.qty FROM b JOIN a ON a.id = b.order_id
                                      JOIN c ON c.customer_id = a.customer_id;
    """,
    ).plans
    assert [plans[n].key for n in "abcd"] == [("id",), ("order_id",), ("customer_id",), ("order_id",)]


@pytest.mark.parametrize(
    "select, changelog",
    [
        ("SELECT user_id, url FROM clicks WHERE url IS NOT NULL", "append-only"),
        ("SELECT user_id, COUNT(*) AS n FROM clicks GROUP BY user_id", "upsert"),
        ("SELECT DISTINCT url FROM clicks", "append-only"),
        ("SELECT url FROM clicks UNION ALL SELECT url FROM clicks WHERE user_id > 0", "append-only"),
        ("SELECT a.url, b.ts FROM clicks a JOIN clicks b ON a.user_id = b.user_id", "append-only"),
        (
            "SELECT a.url FROM clicks a WHERE EXISTS (SELECT 1 FROM clicks b WHERE b.user_id = a.user_id)",
            "append-only",
        ),
        (
            "SELECT a.url FROM clicks a WHERE NOT EXISTS (SELECT 1 FROM clicks b WHERE b.user_id = a.user_id)",
            "retract",
        ),
        ("SELECT a.url, b.ts FROM clicks a LEFT JOIN clicks b ON a.user_id = b.user_id", "retract"),
        ("SELECT url FROM clicks UNION ALL SELECT name AS url FROM customers", "retract"),
        ("SELECT id, name FROM customers", "upsert"),
        ("SELECT url FROM clicks ORDER BY ts LIMIT 3", "retract"),  # recomputed in full: rows come and go
        # Monotone operators over append-only inputs, but an expression changes its value for rows already emitted:
        ("SELECT user_id, COUNT(*) OVER (PARTITION BY user_id) AS c FROM clicks", "retract"),
        (
            "SELECT user_id, url FROM (SELECT user_id, url, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY ts) AS rn "
            "FROM clicks) AS r WHERE rn = 1",
            "upsert",
        ),  # one row per user_id: -U/+U when a row moves to the top
        (
            "SELECT user_id, url FROM (SELECT user_id, url, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY ts) AS rn "
            "FROM clicks) AS r WHERE rn <= 2",
            "retract",
        ),
        (
            "SELECT user_id, url FROM (SELECT user_id, url, "
            "ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY PROCTIME()) AS rn FROM clicks) AS r WHERE rn = 1",
            "append-only",
        ),  # keep-first by arrival
        ("SELECT url FROM clicks WHERE user_id > (SELECT MIN(id) FROM customers)", "retract"),
        ("SELECT url FROM clicks WHERE user_id > (SELECT MIN(user_id) FROM clicks)", "retract"),
        ("SELECT url, rand() AS r FROM clicks", "retract"),
        ("SELECT url FROM clicks WHERE user_id IN (SELECT id FROM customers) OR url IS NULL", "retract"),
        ("SELECT a.url FROM clicks a CROSS JOIN clicks b", "append-only"),  # recomputed in full, but monotone
        ("SELECT url FROM clicks WHERE EXISTS (SELECT 1 FROM clicks WHERE user_id > 5)", "append-only"),
        ("SELECT url FROM clicks WHERE NOT EXISTS (SELECT 1 FROM clicks WHERE user_id > 5)", "retract"),
    ],
)
def test_changelog_kind(tmp_path, select, changelog):
    assert plan(tmp_path, select).changelog == changelog


def test_append_only_flows_through_views(tmp_path):
    plans = catalog(
        tmp_path,
        """
        CREATE MATERIALIZED VIEW a AS SELECT user_id, url FROM clicks WHERE url IS NOT NULL;
        CREATE MATERIALIZED VIEW b AS SELECT DISTINCT url FROM a;
        CREATE MATERIALIZED VIEW c AS SELECT url, COUNT(*) AS n FROM b GROUP BY url;
        CREATE MATERIALIZED VIEW d AS SELECT url FROM c WHERE n > 1;
    """,
    ).plans
    assert [plans[n].changelog for n in "abcd"] == ["append-only", "append-only", "upsert", "upsert"]


@pytest.mark.parametrize(
    "select, bounded, state",
    [
        ("SELECT COUNT(*) AS n, SUM(qty) AS q FROM orders", True, "one row: count, sum(qty), count(qty)"),
        (
            "SELECT customer_id, COUNT(*) AS n FROM orders GROUP BY customer_id",
            False,
            "per group (customer_id): count",
        ),
        ("SELECT MIN(price) AS lo FROM orders", False, "one row: count, min/max multiset of price"),
        ("SELECT MIN(ts) AS first FROM clicks", True, "one row: count, min(ts)"),
        ("SELECT COUNT(DISTINCT url) AS n FROM clicks", False, "one row: count, count per distinct url"),
        ("SELECT DISTINCT url FROM clicks", False, "per distinct row: count"),
        ("SELECT id, name FROM customers WHERE name LIKE 'A%'", True, "none"),
        (
            "SELECT id FROM customers ORDER BY id LIMIT 1",
            True,
            "one partition: its first 11 rows in order and its row count",
        ),
    ],
)
def test_state_and_whether_it_is_bounded(tmp_path, select, bounded, state):
    p = plan(tmp_path, select)
    assert (p.bounded_state, p.state) == (bounded, state)


def test_require_bounded_state_turns_unbounded_views_into_errors(tmp_path):
    views = "CREATE MATERIALIZED VIEW ok AS SELECT COUNT(*) AS n FROM orders;\n"
    assert catalog(tmp_path, views, "[plan]\nrequire_bounded_state = true\n").plans["ok"].bounded_state
    views += "CREATE MATERIALIZED VIEW grows AS SELECT DISTINCT url FROM clicks;\n"
    with pytest.raises(SqlError, match=r"views/views.sql:2: view grows: its state grows without bound"):
        catalog(tmp_path, views, "[plan]\nrequire_bounded_state = true\n")
    assert (
        not catalog(tmp_path, views, "[plan]\nrequire_bounded_state = false\n").plans["grows"].bounded_state
    )


def test_a_state_ttl_bounds_the_state_of_whatever_keeps_it_by_key_and_is_noted(tmp_path):
    views = (
        "CREATE MATERIALIZED VIEW g WITH ('state_ttl' = '7 days') AS\n"
        "SELECT o.customer_id, c.country, COUNT(*) AS n, MAX(o.price) AS top FROM orders o\n"
        "JOIN customers c ON o.customer_id = c.id GROUP BY o.customer_id, c.country HAVING COUNT(*) > 1;\n"
        "CREATE MATERIALIZED VIEW d WITH ('state_ttl' = '36 hours') AS SELECT DISTINCT url FROM clicks;\n"
        "CREATE MATERIALIZED VIEW t WITH ('state_ttl' = '2 hours') AS SELECT user_id, url FROM (SELECT\n"
        "user_id, url, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY ts DESC) AS rn FROM clicks) WHERE rn <= 3;\n"
        "CREATE MATERIALIZED VIEW o WITH ('state_ttl' = '1 hour') AS\n"
        "SELECT user_id, url, COUNT(*) OVER (PARTITION BY user_id ORDER BY ts) AS n FROM clicks;\n"
        "CREATE MATERIALIZED VIEW s WITH ('state_ttl' = '1 day') AS SELECT user_id, session_window.start AS s0,\n"
        "COUNT(*) AS n FROM clicks GROUP BY user_id, session_window(ts, '5 minutes');\n"
    )
    plans = catalog(tmp_path, views, "[plan]\nrequire_bounded_state = true\n").plans
    for name, ttl in (("g", "7 days"), ("d", "36 hours"), ("t", "2 hours"), ("o", "1 hour"), ("s", "1 day")):
        assert plans[name].bounded_state and plans[name].by_arrival
        assert plans[name].state.endswith(f"a key untouched for {ttl} of batch clock expires (state_ttl)")
        assert any(n.startswith(f"state_ttl '{ttl}'") for n in plans[name].notes)
    assert plans["g"].view.state_ttl == 7 * 86_400_000_000
    assert plans["d"].changelog == "upsert"  # (a DISTINCT of an append-only source, whose rows now leave)
    for name, what in (("t", "top-N"), ("o", "window function"), ("s", "session window")):
        assert f"the partitions of its {what} untouched" in plans[name].notes[-1]
    # auto never recomputes them by cost, and mv plan says so
    assert "  policy     auto: the delta rule in every batch (never recomputed by cost" in "\n".join(
        describe(plans["g"])
    )


@pytest.mark.parametrize(
    "view, error",
    [
        (
            "WITH ('state_ttl' = '1 day') AS SELECT id, name FROM customers",
            "state_ttl '1 day' expires the keys of a GROUP BY or SELECT DISTINCT, or the partitions of a top-N",
        ),
        (
            "WITH ('state_ttl' = '1 day') AS SELECT COUNT(*) AS n FROM orders",
            "state_ttl '1 day' expires the keys of a GROUP BY or SELECT DISTINCT, or the partitions of a top-N",
        ),
        (
            "WITH ('state_ttl' = '1 day') AS SELECT url FROM "
            "(SELECT url, ROW_NUMBER() OVER (ORDER BY ts DESC) AS rn FROM clicks) WHERE rn <= 5",
            "expires the partitions of a top-N, and this one has a single partition",
        ),
        (
            "WITH ('state_ttl' = '1 day') AS SELECT session_window.start AS s, COUNT(*) AS n FROM clicks "
            "GROUP BY session_window(ts, '5 minutes')",
            "expires the partitions of a session window, and this one has a single partition",
        ),
        (
            "WITH ('state_ttl' = '1 day') AS SELECT user_id, n FROM (SELECT user_id, n, ROW_NUMBER() OVER "
            "(PARTITION BY user_id ORDER BY n DESC) AS rn FROM (SELECT user_id, url, COUNT(*) AS n FROM "
            "clicks GROUP BY user_id, url)) WHERE rn = 1",
            "needs what it expires to read a stateless input, and this view's top-N reads another",
        ),
        (
            "WITH ('state_ttl' = '1 day') AS SELECT n, COUNT(*) AS k FROM "
            "(SELECT customer_id, COUNT(*) AS n FROM orders GROUP BY customer_id) GROUP BY n",
            "needs what it expires to read a stateless input, and this view's GROUP BY reads another",
        ),
        (
            "WITH ('state_ttl' = '1 day', 'refresh_policy' = 'full') AS "
            "SELECT customer_id, COUNT(*) AS n FROM orders GROUP BY customer_id",
            "the view is recomputed in full on every refresh, so it keeps no state to expire",
        ),
        (
            "WITH ('state_ttl' = '1 day', 'allowed_lateness' = '1 hour') AS "
            "SELECT TUMBLE_START(ts, INTERVAL '1' HOUR) AS w, COUNT(*) AS n FROM clicks "
            "GROUP BY TUMBLE(ts, INTERVAL '1' HOUR)",
            "state_ttl and allowed_lateness on one view",
        ),
        (
            "WITH ('state_ttl' = '1 day') AS SELECT url, FIRST(ts) AS t FROM clicks GROUP BY url",
            "cannot say what FIRST/LAST by arrival gave",
        ),
        ("WITH ('state_ttl' = '0 days') AS SELECT DISTINCT url FROM clicks", "longer than nothing"),
        (
            "WITH ('state_ttl' = 'a week') AS SELECT DISTINCT url FROM clicks",
            "cannot read state_ttl 'a week'",
        ),
    ],
)
def test_a_state_ttl_where_it_cannot_hold_is_an_error_at_the_view(tmp_path, view, error):
    with pytest.raises(SqlError, match=r"views/views.sql:1: view v: .*" + re.escape(error)):
        catalog(tmp_path, f"CREATE MATERIALIZED VIEW v {view};")


def test_views_are_ordered_after_what_they_read_whatever_the_file_order(tmp_path):
    c = catalog(
        tmp_path,
        """
        CREATE MATERIALIZED VIEW top AS SELECT country FROM mid WHERE n > 1;
        CREATE MATERIALIZED VIEW mid AS SELECT country, COUNT(*) AS n FROM base GROUP BY country;
        CREATE MATERIALIZED VIEW base AS SELECT id, country FROM customers;
    """,
    )
    views = [n for n in c.order if n in c.plans]
    assert views == ["base", "mid", "top"]
    assert c.order.index("customers") < c.order.index("base")
    assert sorted(c.graph.predecessors("top")) == ["mid"]


def test_positions_are_the_files_even_after_other_statements_on_the_same_line(tmp_path):
    (tmp_path / "views").mkdir()
    (tmp_path / "views" / "sources.sql").write_text(SOURCES)
    (tmp_path / "views" / "views.sql").write_text(
        "CREATE MATERIALIZED VIEW a AS SELECT id FROM customers; CREATE MATERIALIZED VIEW b AS\n"
        "  SELECT id, nmae FROM customers;\n"
    )
    with pytest.raises(SqlError) as e:
        load_catalog(load_config(tmp_path))
    assert str(e.value).startswith("views/views.sql:2:14: view b: unknown column 'nmae'")


def test_hostile_column_names_are_always_quoted(tmp_path):
    p = plan(
        tmp_path, "SELECT `we;ird col`, `back``tick` AS `x; DROP TABLE customers`, `Ünïcode` FROM events"
    )
    assert [c.name for c in p.columns] == ["we;ird col", "x; DROP TABLE customers", "Ünïcode"]
    project = p.root
    for expression in project.expressions():
        sql = expression.sql("spark")
        reparsed = sqlglot.parse_one(sql, read="spark")
        assert isinstance(reparsed, exp.Column) and reparsed.name == expression.name
        assert reparsed.this.quoted
    assert project.projections[1].sql("spark") == "`events`.`back``tick`"


def test_names_resolve_case_insensitively_and_keep_the_spelling_written(tmp_path):
    p = plan(tmp_path, "SELECT ID, c.NAME FROM CUSTOMERS c WHERE Country = 'NL'")
    assert p.inputs == ("customers",) and [c.name for c in p.columns] == ["ID", "NAME"] and p.key == ("ID",)


def test_column_types_follow_spark(tmp_path):
    p = plan(
        tmp_path,
        """SELECT qty * price AS amount, SUM(qty) AS total_qty, AVG(price) AS avg_price,
                                 SUM(price) AS revenue, COUNT(*) AS n, MAX(ts) AS last, price / 3 AS third
                          FROM orders GROUP BY qty, price""",
    )
    types = {c.name: (c.type.sql("spark"), c.nullable) for c in p.columns}
    assert types == {
        "amount": ("DECIMAL(21, 2)", True),
        "total_qty": ("BIGINT", True),
        "avg_price": ("DECIMAL(14, 6)", True),
        "revenue": ("DECIMAL(20, 2)", True),
        "n": ("BIGINT", False),
        "last": ("TIMESTAMP", True),
        "third": ("DECIMAL(14, 6)", True),
    }


def test_event_time_survives_filter_and_projection_only(tmp_path):
    plans = catalog(
        tmp_path,
        """
        CREATE MATERIALIZED VIEW a AS SELECT user_id, ts AS event_time FROM clicks WHERE url IS NOT NULL;
        CREATE MATERIALIZED VIEW b AS SELECT event_time FROM a;
        CREATE MATERIALIZED VIEW c AS SELECT user_id, MAX(event_time) AS ts FROM a GROUP BY user_id;
    """,
    ).plans
    assert [plans[n].to_json()["event_time"] for n in "abc"] == [["event_time"], ["event_time"], []]


def test_the_example_project_plans(tmp_path):
    root = Path(__file__).parent.parent.parent
    shutil.copytree(root / "views", tmp_path / "views")
    c = load_catalog(load_config(tmp_path))
    assert {n: p.strategy for n, p in c.plans.items()} == {n: "incremental" for n in c.plans}


@pytest.mark.parametrize(
    "select",
    [
        "SELECT o.id, c.name FROM orders o JOIN customers c ON o.customer_id = c.id AND o.qty > 10",
        "SELECT o.id, c.name FROM orders o LEFT JOIN customers c ON o.customer_id = c.id AND c.country = 'NL'",
        "SELECT o.id, c.name FROM orders o FULL JOIN customers c ON o.customer_id = c.id",
        "SELECT o.id, c.name FROM orders o, customers c WHERE o.customer_id = c.id",
        "SELECT id FROM customers WHERE id IN (SELECT customer_id FROM orders WHERE qty > 0)",
        "SELECT id FROM customers c WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.id)",
        "SELECT c.country, SUM(o.qty) AS total FROM orders o JOIN customers c ON o.customer_id = c.id GROUP BY 1",
    ],
)
def test_equi_joins_are_incremental(tmp_path, select):
    p = plan(tmp_path, select)
    assert (p.strategy, p.reason) == ("incremental", None)
    assert "join: none" in p.state


@pytest.mark.parametrize(
    "select, reason",
    [
        ("SELECT o.id, c.name FROM orders o CROSS JOIN customers c", "a join without an equality condition"),
        (  # (an outer join with such a condition counts each row's matches: tests/spark/test_refresh_joins.py)
            "SELECT o.id FROM orders o LEFT SEMI JOIN customers c ON o.customer_id = c.id AND o.qty > c.id",
            "a semi join whose ON condition compares the two sides other than by equality",
        ),
        (  # a scalar subquery correlated by other than an equality stays in its expression
            "SELECT o.id FROM orders o WHERE o.qty > (SELECT AVG(i.qty) FROM orders i WHERE i.ts < o.ts)",
            "a subquery inside an expression",
        ),
        (
            "WITH o AS (SELECT customer_id, qty FROM orders WHERE qty > 0), "  # a CTE that reads a CTE
            "t AS (SELECT customer_id, SUM(qty) AS total FROM o GROUP BY customer_id) "
            "SELECT c.id, t.total FROM customers c JOIN t ON t.customer_id = c.id",
            "an aggregate, DISTINCT or window function inside a join's input that is not a subquery in FROM",
        ),
    ],
)
def test_joins_planned_full_say_why(tmp_path, select, reason):
    p = plan(tmp_path, select)
    assert p.strategy == "full"
    assert reason in p.reason


_ATOM = st.tuples(st.sampled_from(["a", "b", "c", "d"]), st.booleans())  # a column, negated or not
_BRANCH = st.lists(_ATOM, min_size=1, max_size=3)


def _truth(e: exp.Expression, row: dict[str, bool | None]) -> bool | None:
    """SQL's three-valued value of an AND/OR/NOT formula over boolean columns."""
    if isinstance(e, exp.Paren):
        return _truth(e.this, row)
    if isinstance(e, exp.Column):
        return row[e.name]
    if isinstance(e, exp.Not):
        v = _truth(e.this, row)
        return None if v is None else not v
    a, b = _truth(e.this, row), _truth(e.expression, row)
    if isinstance(e, exp.And):
        return False if False in (a, b) else None if None in (a, b) else True
    return True if True in (a, b) else None if None in (a, b) else False


@settings(max_examples=200, deadline=None)
@given(branches=st.lists(_BRANCH, min_size=2, max_size=4), common=_BRANCH)
def test_an_or_whose_branches_repeat_a_conjunct_keeps_its_value_when_it_is_taken_out(branches, common):
    """`(c AND r1) OR (c AND r2)` and `c AND (r1 OR r2)` agree on every row of TRUE, FALSE and NULL values (the
    join rewrite of plan/rewrites/joins.py relies on it), and every conjunct all branches repeat is taken out."""
    import itertools

    from mvengine.plan.rewrites.joins import factor_or

    def atom(name: str, negated: bool) -> exp.Expression:
        return exp.Not(this=exp.column(name)) if negated else exp.column(name)

    written = " OR ".join(
        "(" + " AND ".join(atom(*a).sql() for a in [*common, *branch]) + ")" for branch in branches
    )
    formula = sqlglot.parse_one(written)
    taken, either = factor_or(formula)
    assert {e.sql() for e in taken} >= {atom(*a).sql() for a in common}
    for values in itertools.product([True, False, None], repeat=4):
        row = dict(zip("abcd", values))
        after = [_truth(e, row) for e in [*taken, *([either] if either is not None else [])]]
        together = False if False in after else None if None in after else True
        assert together == _truth(formula, row), (written, [e.sql() for e in taken], either)


@pytest.mark.parametrize(
    "select, state, bounded",
    [
        (
            "SELECT user_id, ts, LAG(url, 3) OVER (PARTITION BY user_id ORDER BY ts) AS before3 FROM clicks",
            "each with the time of the row 3 after it",
            True,
        ),
        (
            "SELECT user_id, ts, COUNT(*) OVER (PARTITION BY user_id ORDER BY ts, url ROWS BETWEEN 5 PRECEDING "
            "AND 2 PRECEDING) AS n, LAG(url) OVER (PARTITION BY user_id ORDER BY ts) AS prev FROM clicks",
            "each with the time of the row 5 after it",
            True,
        ),
        (  # (a running count reads every row before, through what they count up to)
            "SELECT user_id, ts, COUNT(*) OVER (PARTITION BY user_id ORDER BY ts) AS n, "
            "RANK() OVER (PARTITION BY user_id ORDER BY ts) AS r FROM clicks",
            "then folded into one row of its windows' running values",
            True,
        ),
        (  # (a running count beside a frame that ends before the current row)
            "SELECT user_id, ts, COUNT(*) OVER (PARTITION BY user_id ORDER BY ts) AS n, "
            "COUNT(*) OVER (PARTITION BY user_id ORDER BY ts ROWS BETWEEN 3 PRECEDING AND 1 PRECEDING) AS m "
            "FROM clicks",
            "its input rows, to evaluate its windows again",
            False,
        ),
        (  # (running windows in two orders)
            "SELECT user_id, ts, COUNT(*) OVER (PARTITION BY user_id ORDER BY ts) AS n, "
            "ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY ts, url) AS r FROM clicks",
            "its input rows, to evaluate its windows again",
            False,
        ),
        (  # (a DECIMAL's average: Spark keeps its sum as a DECIMAL)
            "SELECT user_id, ts, AVG(CAST(url AS DECIMAL(10, 2))) OVER (PARTITION BY user_id ORDER BY ts) AS a "
            "FROM clicks",
            "its input rows, to evaluate its windows again",
            False,
        ),
        (  # (LEAD reads the row after, which may be still to come)
            "SELECT user_id, ts, LEAD(url) OVER (PARTITION BY user_id ORDER BY ts) AS next FROM clicks",
            "its input rows, to evaluate its windows again",
            False,
        ),
        (
            "SELECT user_id, session_window.end AS e, COUNT(*) AS n FROM clicks "
            "GROUP BY user_id, session_window(ts, '5 minutes')",
            "each with its session's end",
            True,
        ),
    ],
)
def test_allowed_lateness_bounds_what_reads_a_bounded_past(tmp_path, select, state, bounded):
    view = catalog(tmp_path, f"CREATE MATERIALIZED VIEW v WITH ('allowed_lateness' = '1 hour') AS {select};")
    plan = view.plans["v"]
    assert state in plan.state and plan.bounded_state is bounded


@pytest.mark.parametrize(
    "select, error",
    [
        (
            "SELECT user_id, ts, LAG(url) OVER (PARTITION BY user_id ORDER BY ts DESC) AS prev FROM clicks",
            "needs each to ORDER BY the same event-time column first, ascending",
        ),
        (
            "SELECT user_id, ts, LAG(url) OVER (PARTITION BY user_id ORDER BY url, ts) AS prev FROM clicks",
            "needs each to ORDER BY the same event-time column first, ascending",
        ),
        (  # (a row without a time would sort after rows still to come, and its values change with them)
            "SELECT user_id, ts, LAG(url) OVER (PARTITION BY user_id ORDER BY ts NULLS LAST) AS prev FROM clicks",
            "needs each to ORDER BY the same event-time column first, ascending",
        ),
        (
            "SELECT id, ts, LAG(qty) OVER (PARTITION BY customer_id ORDER BY ts) AS prev FROM orders",
            "needs an append-only input",
        ),
        (
            "SELECT c.user_id, c.ts, LAG(c.url) OVER (PARTITION BY c.user_id ORDER BY c.ts) AS prev "
            "FROM clicks c JOIN customers k ON c.user_id = k.id",
            "needs them maintained incrementally over a source's rows",
        ),
    ],
)
def test_allowed_lateness_on_window_functions_it_cannot_bound_is_an_error_at_the_view(
    tmp_path, select, error
):
    with pytest.raises(SqlError, match=r"views/views.sql:1: view v: .*" + re.escape(error)):
        catalog(tmp_path, f"CREATE MATERIALIZED VIEW v WITH ('allowed_lateness' = '1 hour') AS {select};")
