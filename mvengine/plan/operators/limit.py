"""Limit: ORDER BY ... LIMIT (top-N), LIMIT and OFFSET. No rule yet: rows enter and leave the first N as others
change, so the view is recomputed in full; a LIMIT without ORDER BY picks arbitrary rows."""

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
