"""Time bounds (plan/time_bounds.py). Interval joins: the bound an inner join's ON condition puts on the difference
of the two sides' times, in every spelling of it; none where one end is open, the columns are not TIMESTAMPs of
the two sides, or the join is a semi or anti join. Temporal filters: the comparisons of a time with NOW(), and the other
uses of the clock, which are recomputed."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlglot import exp

from mvengine.plan.nodes import Filter, Join
from mvengine.plan.time_bounds import ClockBound, clock_bounds, join_time_bound
from tests.unit.test_plan import plan

HOUR, MINUTE, SECOND = 3_600_000_000, 60_000_000, 1_000_000


def _bound(tmp_path: Path, on: str, kind: str = "JOIN"):
    selected = "c.url" if "SEMI" in kind else "c.url, o.id"
    view = plan(
        tmp_path, f"SELECT {selected} FROM clicks c {kind} orders o ON c.user_id = o.customer_id AND {on}"
    )
    (join,) = [n for n in view.root.walk() if isinstance(n, Join)]
    return join_time_bound(join)


@pytest.mark.parametrize(
    "on, low, high",
    [
        ("c.ts BETWEEN o.ts - INTERVAL '1' HOUR AND o.ts + INTERVAL '10' MINUTE", -HOUR, 10 * MINUTE),
        ("c.ts >= o.ts - INTERVAL 1 HOUR AND c.ts < o.ts + INTERVAL 10 MINUTES", -HOUR, 10 * MINUTE),
        ("o.ts - INTERVAL '1' HOUR <= c.ts AND o.ts + INTERVAL '10' MINUTE > c.ts", -HOUR, 10 * MINUTE),
        ("o.ts BETWEEN c.ts - INTERVAL '10' MINUTE AND c.ts + INTERVAL '1' HOUR", -HOUR, 10 * MINUTE),
        ("c.ts + INTERVAL '5' SECOND >= o.ts AND c.ts <= o.ts", -5 * SECOND, 0),
        ("c.ts BETWEEN (o.ts - INTERVAL '1' HOUR) - INTERVAL '1' HOUR AND o.ts", -2 * HOUR, 0),
        # a day is 23 or 25 hours in Spark across a daylight-saving change of the session time zone: 3 h of slack
        ("c.ts BETWEEN o.ts - INTERVAL '1' DAY AND o.ts + INTERVAL 2 DAYS", -27 * HOUR, 51 * HOUR),
        (  # two lower bounds: the tighter holds
            "c.ts >= o.ts - INTERVAL '2' HOUR AND c.ts >= o.ts - INTERVAL '1' HOUR AND c.ts <= o.ts",
            -HOUR,
            0,
        ),
    ],
)
def test_an_inner_join_on_both_times_is_bounded(tmp_path, on, low, high):
    bound = _bound(tmp_path, on)
    assert bound is not None
    assert (bound.left.sql(), bound.right.sql()) == ('"c"."ts"', '"o"."ts"')
    assert (bound.low, bound.high) == (low, high)


@pytest.mark.parametrize(
    "on, kind",
    [
        ("c.ts >= o.ts - INTERVAL '1' HOUR", "JOIN"),  # one end open: the whole past of the stream can match
        ("c.ts BETWEEN o.ts - INTERVAL '1' HOUR AND o.ts", "LEFT SEMI JOIN"),
        ("c.url BETWEEN o.status AND o.status", "JOIN"),  # not times
        ("c.ts BETWEEN c.ts - INTERVAL '1' HOUR AND c.ts", "JOIN"),  # one side's times
        ("c.ts BETWEEN o.ts - INTERVAL '1' MONTH AND o.ts", "JOIN"),  # months are no fixed duration
    ],
)
def test_other_conditions_bound_nothing(tmp_path, on, kind):
    assert _bound(tmp_path, on, kind) is None


@pytest.mark.parametrize("kind", ["LEFT JOIN", "RIGHT JOIN", "FULL JOIN"])
def test_an_outer_join_on_both_times_is_bounded(tmp_path, kind):
    bound = _bound(tmp_path, "c.ts BETWEEN o.ts - INTERVAL '1' HOUR AND o.ts", kind)
    assert bound is not None and (bound.low, bound.high) == (-HOUR, 0)


def _clock(tmp_path: Path, where: str):
    view = plan(tmp_path, f"SELECT c.url, c.ts FROM clicks c WHERE {where}")
    (node,) = [n for n in view.root.walk() if isinstance(n, Filter) and n.predicate.find(exp.Func)]
    return view, clock_bounds(node)


@pytest.mark.parametrize(
    "where, shifts",
    [
        ("c.ts > NOW() - INTERVAL '1' HOUR", [(HOUR, 0)]),
        ("c.ts >= CURRENT_TIMESTAMP - INTERVAL 10 MINUTES", [(10 * MINUTE, 0)]),
        ("c.ts + INTERVAL '1' HOUR > current_timestamp()", [(HOUR, 0)]),
        ("NOW() < c.ts + INTERVAL '1' DAY", [(24 * HOUR, 3 * HOUR)]),  # a day in the session zone: 23-25 h
        ("c.ts <= NOW() AND c.url <> ''", [(0, 0)]),  # rows enter as the clock reaches them
        (
            "NOW() BETWEEN c.ts AND c.ts + INTERVAL '5' SECOND",
            [(0, 0), (5 * SECOND, 0)],
        ),
    ],
)
def test_a_filter_comparing_a_time_with_the_clock_is_temporal(tmp_path, where, shifts):
    view, bounds = _clock(tmp_path, where)
    assert bounds is not None
    assert [(b.column.name, b.shift, b.slack) for b in bounds] == [("ts", s, k) for s, k in shifts]
    assert view.strategy == "incremental"
    assert view.bounded_state and "temporal filter" in view.state
    assert view.changelog == "retract"  # rows leave as the clock passes them


@pytest.mark.parametrize(
    "where",
    [
        "DATE(c.ts) = CURRENT_DATE()",  # a day, not the clock's instant
        "c.ts > NOW() - INTERVAL '1' MONTH",  # months are no fixed duration
        "c.ts > NOW() - INTERVAL '1' HOUR OR c.url = ''",  # a row could pass by either
        "HOUR(NOW()) = 3",
    ],
)
def test_other_uses_of_the_clock_are_recomputed(tmp_path, where):
    view, bounds = _clock(tmp_path, where)
    assert bounds is None
    assert view.strategy == "full" and "non-deterministic" in (view.reason or "")


def test_a_flip_range_covers_the_rows_the_clock_passed():
    bound = ClockBound(exp.column("ts"), HOUR, 0)  # ts > NOW() - 1 hour: a row leaves an hour after its time
    low, high = bound.flipping(10 * HOUR, 12 * HOUR)
    assert (low, high) == (9 * HOUR - 1, 11 * HOUR + 1)


@pytest.mark.parametrize(
    "query, incremental",
    [
        # one side of an inner join: moved onto that side, under the join
        (
            "FROM clicks c JOIN orders o ON c.user_id = o.customer_id WHERE c.ts > NOW() - INTERVAL '1' HOUR",
            True,
        ),
        ("FROM clicks c, orders o WHERE c.user_id = o.customer_id AND o.ts <= NOW()", True),
        # the side a LEFT JOIN pads: the WHERE drops the padded rows, which a filter under the join would keep
        ("FROM clicks c LEFT JOIN orders o ON c.user_id = o.customer_id WHERE o.ts <= NOW()", False),
        (
            "FROM clicks c JOIN orders o ON c.user_id = o.customer_id WHERE c.ts > NOW() - (o.ts - o.ts)",
            False,
        ),
    ],
)
def test_a_temporal_filter_on_one_side_of_a_join_is_moved_onto_it(tmp_path, query, incremental):
    view = plan(tmp_path, f"SELECT c.url, o.id {query}")
    assert (view.strategy == "incremental") == incremental, view.reason
    if not incremental:
        assert "NOW() over a join's rows" in (view.reason or "") or "non-deterministic" in (view.reason or "")
