"""Over: window functions (`f(...) OVER (PARTITION BY p ORDER BY o [frame])`) over partitions of the input. The
rule keeps the input rows of every partition and evaluates the windows of the partitions a batch touches again,
before and after it, emitting what changed (incremental/over.py): exact for every window function and frame
Spark has, at the cost of the touched partitions' size. The driver evaluates ROW_NUMBER, RANK, DENSE_RANK, LAG, LEAD,
and COUNT, SUM, AVG, MIN and MAX over ROWS frames and the RANGE frames of UNBOUNDED and CURRENT ROW
(incremental/driver_support.over_unsupported says which types). Never append-only: a new row changes its partition's
values (a running total, a rank, an average over the last rows)."""

from __future__ import annotations

from sqlglot import exp

from mvengine.plan.nodes import Over, show
from mvengine.plan.operators.base import Claim, Operator, never_append_only, no_reasons


def state(node: Over, claim: Claim, purged: bool) -> tuple[str, bool]:
    partition = ", ".join(show(p, node.child.fields) for p in node.partition)
    per = f"per partition ({partition})" if partition else "of the one partition (no PARTITION BY)"
    rows = f"{per}: its input rows, to evaluate its windows again"
    back = rows_back(node)
    if purged and back is not None and event_time_order(node) is not None:
        return (
            f"{rows}, each with the time of the row {back} after it, dropped once the watermark is past that "
            "and the lateness",
            True,
        )
    if purged and back is None and running(node) and event_time_order(node) is not None:
        return (
            f"{per}: its input rows until the watermark less the lateness passes them, "
            "then folded into one row of its windows' running values (row count, sums, extremes)",
            True,
        )
    return rows, False


def event_time_order(node: Over) -> exp.Column | None:
    """The event-time attribute (a source's WATERMARK column) that all the windows order by first, ascending,
    NULLs first (Spark's default): with the view's allowed_lateness, a row behind the watermark by more than it
    then sorts before every row still to come, and none of its values can change (nor can those of rows without
    a time, which come only before there is a watermark); None when they do not."""
    firsts = []
    for window in node.windows:
        order = window.args.get("order")
        first = order.expressions[0] if order is not None and order.expressions else None
        if first is None or first.args.get("desc") or first.args.get("nulls_first") is False:
            return None
        if not isinstance(first.this, exp.Column):
            return None
        firsts.append(first.this)
    if not firsts or not firsts[0].meta.get("time_attr"):
        return None
    same = {(c.name, c.table or None) for c in firsts}
    return firsts[0] if len(same) == 1 else None


def rows_back(node: Over) -> int | None:
    """How many rows before a row its windows read at most (`LAG(x, n)`, `ROWS BETWEEN n PRECEDING AND CURRENT
    ROW` or an earlier end); None when one reads further back (an UNBOUNDED or RANGE frame, a rank) or ahead
    (`LEAD`, FOLLOWING). A row with that many rows after it that sort before every row to come is read by
    none of them."""
    most = 0
    for window in node.windows:
        f = window.this
        if isinstance(f, exp.Lag):
            offset = f.args.get("offset")
            if offset is not None and not (isinstance(offset, exp.Literal) and offset.is_int):
                return None
            most = max(most, int(offset.name) if offset is not None else 1)
            continue
        spec = window.args.get("spec")
        if isinstance(f, (exp.Lead, exp.RowNumber, exp.Rank, exp.DenseRank)) or spec is None:
            return None
        start, end = spec.args.get("start"), spec.args.get("end") or "CURRENT ROW"
        if str(spec.args.get("kind")).upper() != "ROWS" or not isinstance(start, exp.Literal):
            return None
        if str(spec.args.get("start_side")).upper() != "PRECEDING" or not start.is_int:
            return None
        if isinstance(end, exp.Literal):
            if str(spec.args.get("end_side")).upper() != "PRECEDING":
                return None
        elif str(end).upper() != "CURRENT ROW":
            return None
        most = max(most, int(start.name))
    return most


_RUNNING = (exp.Count, exp.Sum, exp.Min, exp.Max, exp.Avg)
_RANKS = (exp.RowNumber, exp.Rank, exp.DenseRank)
_AVERAGED = {*exp.DataType.INTEGER_TYPES, exp.DataType.Type.FLOAT, exp.DataType.Type.DOUBLE}


def running(node: Over) -> bool:
    """Whether every window folds the rows of its partition up to the current row and its peers, in one order
    for all: ROW_NUMBER, RANK, DENSE_RANK, and COUNT, SUM, MIN, MAX and AVG (of numbers; a DECIMAL's AVG is
    not) from UNBOUNDED PRECEDING to CURRENT ROW. A row's values then depend on the rows before it only
    through what they fold to, so with the view's allowed_lateness the rows behind the late cutoff fold into
    one row of running values per partition (incremental/over_carry.py)."""
    orders = set()
    for window in node.windows:
        f, order, spec = window.this, window.args.get("order"), window.args.get("spec")
        if order is None or not order.expressions:
            return False
        orders.add(order.sql("spark"))
        if isinstance(f, _RANKS):
            continue
        if not isinstance(f, _RUNNING) or isinstance(f.this, exp.Distinct):
            return False
        if isinstance(f, exp.Avg) and not (f.this.type is not None and f.this.type.this in _AVERAGED):
            return False  # (the carry keeps an AVG's sum as a DOUBLE, as Spark adds these up)
        if spec is not None and not (
            str(spec.args.get("start")).upper() == "UNBOUNDED"
            and str(spec.args.get("start_side")).upper() == "PRECEDING"
            and str(spec.args.get("end") or "CURRENT ROW").upper() == "CURRENT ROW"
        ):
            return False
    return len(orders) == 1


OPERATOR = Operator(Over, True, True, never_append_only, state, no_reasons)
