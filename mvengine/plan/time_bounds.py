"""Time bounds, two kinds.

Interval joins: an inner join whose ON condition bounds one side's time by the other's, as in
`a.ts BETWEEN b.ts - INTERVAL '1' HOUR AND b.ts + INTERVAL '10' MINUTE` (or the same with >=, <=, >, <, in either
order). The join's rule stays the bilinear one (incremental/join.py); the bound only narrows what it reads of a
side before the batch to the times its changes' rows can meet, so that a batch reads the recent files of a stream
and not the whole stream (Flink's interval join keeps the same rows as state, and drops them by the watermark).

Temporal filters: a WHERE that compares a row's time with the clock, as in `ts > NOW() - INTERVAL '1' DAY`. A
batch reads the clock once (its time, which the snapshot commit records), so a row passes or fails the filter
as of each batch; between two batches it can only change for the rows whose time the clock passed, which a
batch reads by their time (incremental/filter.py), as Materialize's temporal filters and RisingWave's do."""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from mvengine.plan.functions import function_name
from mvengine.plan.nodes import Field, Filter, Join, conjuncts
from mvengine.sql.time_syntax import duration_micros


@dataclass(frozen=True)
class TimeBound:
    """left − right ∈ [low, high] in microseconds, for the TIMESTAMP columns `left` (of the join's left side)
    and `right` (at least: three hours are added to each end per DAY or WEEK interval, see _DAY_SLACK); a side
    without a bound is None."""

    left: exp.Column
    right: exp.Column
    low: int | None
    high: int | None

    @property
    def windows(self) -> bool:
        """Whether this is a window join's: the same window bound of both sides, equal."""
        bounds = {c.meta.get("window_bound") for c in (self.left, self.right)}
        return self.low == self.high == 0 and len(bounds) == 1 and None not in bounds

    def describe(self) -> str:
        if self.low == self.high == 0:
            return f"{self.left.sql('spark')} = {self.right.sql('spark')}"
        difference = f"{self.left.sql('spark')} - {self.right.sql('spark')}"
        return f"{difference} BETWEEN {_shown(self.low)} AND {_shown(self.high)}"


def join_time_bound(node: Join) -> TimeBound | None:
    """The bound a join's ON condition (inner or outer) puts on the difference of a left and a right TIMESTAMP
    column, when both its ends are bounded (one end alone narrows nothing a stream holds for ever): an equality
    of the two (a window join's `a.window_start = b.window_start`), or comparisons."""
    if node.kind not in ("inner", "left", "right", "full"):
        return None
    for a, b in node.equi:
        if isinstance(a, exp.Column) and isinstance(b, exp.Column):
            if _side_of(a, node) == "left" and _side_of(b, node) == "right":
                return TimeBound(a, b, 0, 0)
    if node.residual is None:
        return None
    found: dict[tuple[str, str], TimeBound] = {}
    for conjunct in conjuncts(node.residual):
        for lhs, op, rhs in _comparisons(conjunct):
            for a, o, b in ((lhs, op, rhs), (rhs, _FLIPPED[op], lhs)):
                difference = _difference(a, b, node)  # a - b = left - right - offset
                if difference is None:
                    continue
                left, right, offset, slack = difference
                bound = found.get((left.sql(), right.sql()), TimeBound(left, right, None, None))
                if o == ">=":  # left - right >= offset
                    low = offset - slack if bound.low is None else max(bound.low, offset - slack)
                    bound = TimeBound(left, right, low, bound.high)
                else:  # left - right <= offset
                    high = offset + slack if bound.high is None else min(bound.high, offset + slack)
                    bound = TimeBound(left, right, bound.low, high)
                found[(left.sql(), right.sql())] = bound
    return next((b for b in found.values() if b.low is not None and b.high is not None), None)


_FLIPPED = {">=": "<=", "<=": ">="}
_CLOSED: dict[type[exp.Expression], str] = {exp.GTE: ">=", exp.GT: ">=", exp.LTE: "<=", exp.LT: "<="}


def bounds_times(e: exp.Expression, left: set[str], right: str) -> bool:
    """Whether bound conjunct `e` compares a TIMESTAMP column of the `left` aliases with one of the `right` alias
    (each plus or minus constant intervals): an end of an interval join's bound, which WHERE gives the join's
    condition as it gives equalities (plan/rewrites/joins.py)."""
    for lhs, _, rhs in _comparisons(e):
        a, b = _shifted(lhs), _shifted(rhs)
        if a is None or b is None or not all(is_instant(c.type) for c in (a[0], b[0])):
            return False
        sides = {a[0].table.lower(), b[0].table.lower()}
        if not (right in sides and len(sides) == 2 and (sides - {right}) <= left):
            return False
    return bool(_comparisons(e))


def _comparisons(e: exp.Expression) -> list[tuple[exp.Expression, str, exp.Expression]]:
    """`e` as `lhs >= rhs` / `lhs <= rhs` comparisons (a strict one as its closed form: it bounds as much)."""
    if isinstance(e, exp.Between):
        return [(e.this, ">=", e.args["low"]), (e.this, "<=", e.args["high"])]
    op = _CLOSED.get(type(e))
    return [] if op is None else [(e.this, op, e.expression)]


def _difference(
    a: exp.Expression, b: exp.Expression, node: Join
) -> tuple[exp.Column, exp.Column, int, int] | None:
    """(left, right, offset, slack) when `a` is a left TIMESTAMP column and `b` a right one, each plus or minus
    constant intervals, so that a - b = left - right - offset, give or take `slack`."""
    shifted_a, shifted_b = _shifted(a), _shifted(b)
    if shifted_a is None or shifted_b is None:
        return None
    (left, a_shift, a_slack), (right, b_shift, b_slack) = shifted_a, shifted_b
    if _side_of(left, node) != "left" or _side_of(right, node) != "right":
        return None
    return left, right, b_shift - a_shift, a_slack + b_slack


# How far Spark may move a timestamp by `INTERVAL 'n' DAY` (or WEEK) from n × 24 hours: it adds days in the
# session time zone, so across a daylight-saving change a day is 23 or 25 hours (or 22 or 26 where a zone moved
# its clock by two); the bound is widened by this, which only reads a little more (the condition still decides).
_DAY_SLACK = 3 * 3_600_000_000


def _shifted(e: exp.Expression) -> tuple[exp.Column, int, int] | None:
    """`column ± INTERVAL ... ± ...` as (column, microseconds added, how far Spark may add otherwise)."""
    shifted = _shifted_any(e)
    if shifted is None or not isinstance(shifted[0], exp.Column):
        return None
    return shifted[0], shifted[1], shifted[2]


def _shifted_any(e: exp.Expression) -> tuple[exp.Expression, int, int] | None:
    """`e ± INTERVAL ... ± ...` as (e, microseconds added, how far Spark may add otherwise)."""
    shift = slack = 0
    while isinstance(e, (exp.Add, exp.Sub)) and isinstance(e.expression, exp.Interval):
        micros = duration_micros(e.expression.sql("spark"))
        if micros is None:
            return None
        shift += micros if isinstance(e, exp.Add) else -micros
        unit = e.expression.args.get("unit")
        slack += _DAY_SLACK if unit is not None and unit.name.upper().startswith(("DAY", "WEEK")) else 0
        e = e.this
    if isinstance(e, exp.Paren):
        inner = _shifted_any(e.this)
        return None if inner is None else (inner[0], inner[1] + shift, inner[2] + slack)
    return e, shift, slack


CLOCK = frozenset({"now", "current_timestamp"})  # what a temporal filter reads the clock with


@dataclass(frozen=True)
class ClockBound:
    """A comparison of a temporal filter: TIMESTAMP `column` (plus or minus constant intervals) against the clock
    (the same), whose truth for a row can change only when the clock passes the row's `column` + `shift`, give
    or take `slack` (microseconds)."""

    column: exp.Column
    shift: int
    slack: int

    def flipping(self, before: int, now: int) -> tuple[int, int]:
        """The least and greatest `column` of the rows for which it can change as the clock moves from `before`
        to `now` (a microsecond wider each way: a strict comparison flips a microsecond later)."""
        return before - self.shift - self.slack - 1, now - self.shift + self.slack + 1


def clock_bounds(node: Filter) -> list[ClockBound] | None:
    """The comparisons with the clock of a temporal filter, each conjunct `time ± intervals <op> NOW() ±
    intervals` (either order, or BETWEEN); None when the predicate does not read the clock, or reads it in any
    other way (the view is then recomputed: analysis.full_refresh_reasons)."""
    if len({f.qualifier for f in node.child.fields}) > 1:
        return None  # over a join: see plan/operators/filter.py
    found: list[ClockBound] = []
    for conjunct in conjuncts(node.predicate):
        calls = [f for f in conjunct.find_all(exp.Func) if function_name(f) in CLOCK]
        if not calls:
            continue
        comparisons = _comparisons(conjunct)  # (each side of one is a column or the clock, ± intervals)
        if not comparisons:
            return None
        for lhs, _, rhs in comparisons:
            bound = _clock_bound(lhs, rhs, node) or _clock_bound(rhs, lhs, node)
            if bound is None:
                return None
            found.append(bound)
    return found or None


def _clock_bound(time: exp.Expression, clock: exp.Expression, node: Filter) -> ClockBound | None:
    """`time <op> clock` as a ClockBound, when `time` is a TIMESTAMP column of the filter's input and `clock`
    NOW(), each plus or minus constant intervals."""
    column, read = _shifted(time), _shifted_any(clock)
    if column is None or read is None:
        return None
    if not (isinstance(read[0], exp.Func) and function_name(read[0]) in CLOCK):
        return None
    field = _field(node.child.fields, column[0])
    if field is None or not is_instant(field.type):
        return None
    return ClockBound(column[0], column[1] - read[1], column[2] + read[2])


def at_clock(e: exp.Expression, micros: int) -> exp.Expression:
    """`e` with the clock read as `micros` (µs since the epoch): what NOW() gives in a batch of that time."""

    def fixed(node: exp.Expression) -> exp.Expression:
        return instant(micros) if isinstance(node, exp.Func) and function_name(node) in CLOCK else node

    return e.transform(fixed)


def instant(micros: int) -> exp.Expression:
    """The TIMESTAMP `micros` µs after the epoch, as both engines read it (whatever the session time zone)."""
    return exp.Anonymous(this="timestamp_micros", expressions=[exp.Literal.number(micros)])


def _side_of(column: exp.Column, node: Join) -> str | None:
    for side, child in (("left", node.left), ("right", node.right)):
        field = _field(child.fields, column)
        if field is not None:
            return side if is_instant(field.type) else None
    return None


def is_instant(t: exp.DataType | None) -> bool:
    """An instant: TIMESTAMP (Spark's, with the session time zone), not TIMESTAMP_NTZ or DATE."""
    kinds = (exp.DataType.Type.TIMESTAMP, exp.DataType.Type.TIMESTAMPTZ, exp.DataType.Type.TIMESTAMPLTZ)
    return t is not None and t.this in kinds


def _field(fields: tuple[Field, ...], column: exp.Column) -> Field | None:
    return next(
        (f for f in fields if f.name == column.name and f.qualifier == (column.table or None)),
        None,
    )


def _shown(micros: int | None) -> str:
    if micros is None:
        return "-"
    if micros == 0:
        return "0"
    for unit, size in (
        ("DAY", 86_400_000_000),
        ("HOUR", 3_600_000_000),
        ("MINUTE", 60_000_000),
        ("SECOND", 1_000_000),
    ):
        if micros % size == 0:
            return f"INTERVAL '{micros // size}' {unit}"
    return f"{micros} microseconds"
