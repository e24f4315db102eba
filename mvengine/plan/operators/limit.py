"""Limit: what stays a LIMIT once `ORDER BY o LIMIT N` has become a top-N (plan/rewrites/top_n.py): a LIMIT
without ORDER BY, which picks arbitrary rows, and OFFSET. No rule: the view is recomputed in full."""

from __future__ import annotations

from mvengine.plan.nodes import Limit
from mvengine.plan.operators.base import Claim, Operator, never_append_only, no_state


def full_reasons(node: Limit, claim: Claim) -> list[str]:
    if node.offset is not None:
        return ["OFFSET is recomputed in full"]
    if not node.order:
        return ["LIMIT without ORDER BY picks arbitrary rows"]
    return ["ORDER BY ... LIMIT (top-N) is recomputed in full"]


OPERATOR = Operator(Limit, False, False, never_append_only, no_state, full_reasons)
