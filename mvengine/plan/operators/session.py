"""SessionAggregate: GROUP BY a session window. Not linear (a row may merge two sessions, its retraction split
one): the rule re-forms the sessions of the partitions a batch touches from their input rows, kept in state
(unbounded), with Spark's own session_window and aggregates; never on the driver."""

from __future__ import annotations

from sqlglot import exp

from mvengine.plan.nodes import SessionAggregate, show
from mvengine.plan.operators.aggregate import aggregate_reasons
from mvengine.plan.operators.base import Claim, Operator, never_append_only


def state(node: SessionAggregate, claim: Claim, purged: bool) -> tuple[str, bool]:
    groups = [
        show(g, node.child.fields)
        for g in node.groups
        if not (isinstance(g, exp.Column) and g.table == node.window.spec.qualifier)
    ]
    return f"per partition ({', '.join(groups) or 'one'}): its input rows, to re-form its sessions", False


OPERATOR = Operator(
    SessionAggregate,
    True,
    False,
    never_append_only,
    state,
    aggregate_reasons,
)
