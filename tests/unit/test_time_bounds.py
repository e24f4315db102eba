"""Interval joins (plan/time_bounds.py): the bound an inner join's ON condition puts on the difference of the two
sides' times, in every spelling of it; none where one end is open, the columns are not TIMESTAMPs of the two
sides, or the join is not inner."""

from __future__ import annotations

from pathlib import Path

import pytest

from mvengine.plan.nodes import Join
from mvengine.plan.time_bounds import join_time_bound
from tests.unit.test_plan import plan

HOUR, MINUTE, SECOND = 3_600_000_000, 60_000_000, 1_000_000


def _bound(tmp_path: Path, on: str, kind: str = "JOIN"):
    view = plan(
        tmp_path, f"SELECT c.url, o.id FROM clicks c {kind} orders o ON c.user_id = o.customer_id AND {on}"
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
        ("c.ts BETWEEN o.ts - INTERVAL '1' HOUR AND o.ts", "LEFT JOIN"),
        ("c.url BETWEEN o.status AND o.status", "JOIN"),  # not times
        ("c.ts BETWEEN c.ts - INTERVAL '1' HOUR AND c.ts", "JOIN"),  # one side's times
        ("c.ts BETWEEN o.ts - INTERVAL '1' MONTH AND o.ts", "JOIN"),  # months are no fixed duration
    ],
)
def test_other_conditions_bound_nothing(tmp_path, on, kind):
    assert _bound(tmp_path, on, kind) is None
