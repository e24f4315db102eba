"""Over: window functions (`f(...) OVER (PARTITION BY p ORDER BY o [frame])`) over partitions of the input. The
rule keeps the input rows of every partition and evaluates the windows of the partitions a batch touches again,
before and after it, emitting what changed (incremental/over.py): exact for every window function and frame
Spark has, at the cost of the touched partitions' size. The driver evaluates ROW_NUMBER, RANK, DENSE_RANK, LAG, LEAD,
and COUNT, SUM, AVG, MIN and MAX over ROWS frames and the RANGE frames of UNBOUNDED and CURRENT ROW
(incremental/driver_support.over_unsupported says which types). Never append-only: a new row changes its partition's
values (a running total, a rank, an average over the last rows)."""

from __future__ import annotations

from mvengine.plan.nodes import Over, show
from mvengine.plan.operators.base import Claim, Operator, never_append_only, no_reasons


def state(node: Over, claim: Claim, purged: bool) -> tuple[str, bool]:
    partition = ", ".join(show(p, node.child.fields) for p in node.partition)
    return f"per partition ({partition}): its input rows, to evaluate its windows again", False


OPERATOR = Operator(Over, True, True, never_append_only, state, no_reasons)
