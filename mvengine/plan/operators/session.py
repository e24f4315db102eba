"""SessionAggregate: GROUP BY a session window. Not linear (a row may merge two sessions, its retraction split
one): the rule re-forms the sessions of the partitions a batch touches from their input rows, kept in state
(the columns the sessions read), with Spark's own session_window and aggregates, or on the driver
(incremental/session_window.py). Unbounded, but with the view's allowed_lateness: the rows of a session the
watermark has passed by the lateness leave state."""

from __future__ import annotations

from sqlglot import exp

from mvengine.plan.nodes import Field, SessionAggregate, show
from mvengine.plan.operators.aggregate import aggregate_reasons
from mvengine.plan.operators.base import Claim, Operator, never_append_only


def state(node: SessionAggregate, claim: Claim, purged: bool) -> tuple[str, bool]:
    groups = [
        show(g, node.child.fields)
        for g in node.groups
        if not (isinstance(g, exp.Column) and g.table == node.window.spec.qualifier)
    ]
    fields = node.window.child.fields
    read = ", ".join(fields[i].name for i in kept_positions(node))
    rows = f"per partition ({', '.join(groups) or 'one'}): its input rows ({read}), to re-form its sessions"
    if purged and node.window.time.meta.get("time_attr"):
        return (
            f"{rows}, each with its session's end (or up to a gap later), dropped once the watermark is past it "
            "and the lateness",
            True,
        )
    return rows, False


def kept_positions(node: SessionAggregate) -> list[int]:
    """The positions of the window's input fields that its sessions read (the partition, the time, the
    aggregates' arguments): the only columns of its rows the state keeps."""
    fields = node.window.child.fields
    read = [*node.partition, node.window.time, *node.aggregates]
    return sorted(
        {
            position(c, fields)
            for e in read
            for c in e.find_all(exp.Column)
            if not isinstance(c.this, exp.Star)
        }
    )


def position(column: exp.Column, fields: tuple[Field, ...]) -> int:
    """Which of `fields` a bound column is."""
    return next(
        i for i, f in enumerate(fields) if f.name == column.name and f.qualifier == (column.table or None)
    )


OPERATOR = Operator(
    SessionAggregate,
    True,
    True,
    never_append_only,
    state,
    aggregate_reasons,
)
