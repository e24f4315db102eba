"""What identifies a view's computation: a snapshot commit records it, and a view whose SQL hash changed is
rebuilt."""

from __future__ import annotations

import hashlib

from mvengine.plan.nodes import Scan
from mvengine.plan.view_plan import ViewPlan


def sql_hash(plan: ViewPlan) -> str:
    """`computation_hash` of the plan, once per plan object (asked twice in every batch of every view)."""
    known = _HASHES.get(id(plan))
    if known is None or known[0] is not plan:
        known = _HASHES[id(plan)] = (plan, computation_hash(plan))
    return known[1]


_HASHES: dict[
    int, tuple[ViewPlan, str]
] = {}  # id(plan) -> (the plan, kept alive so its id is not reused; hash)


def computation_hash(plan: ViewPlan) -> str:
    """Identifies what a view computes: its query (as sqlglot prints it, so comments and layout do not count),
    its column names, its strategy and the state it keeps (which changes when an input's append-only claim
    does: a MIN/MAX then needs its multiset), the rows expectations drop from its inputs and from it, and the
    columns of each input it reads (a column added to a CREATE TABLE changes the rows its state keeps; a view
    whose upstream view's columns changed is rebuilt)."""
    scans = sorted(
        {
            f"{n.input}({','.join(f'{f.name} {f.type.sql()}' for f in n.fields)})"
            for n in plan.root.walk()
            if isinstance(n, Scan)
        }
    )
    text = "|".join(
        [
            plan.strategy,
            ",".join(c.name for c in plan.columns),
            plan.view.query.sql("spark"),
            plan.state,
            *plan.drops,
            *scans,
        ]
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]
