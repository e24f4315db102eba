"""Opaque: what the incremental compiler does not understand (INTERSECT, EXCEPT, LATERAL VIEW, GROUP BY ROLLUP,
...): no rule, so the view is recomputed in full, for the reason the binder gave."""

from __future__ import annotations

from mvengine.plan.nodes import Opaque
from mvengine.plan.operators.base import Claim, Operator, never_append_only, no_state


def full_reasons(node: Opaque, claim: Claim) -> list[str]:
    return [node.reason or f"{node.what} is recomputed in full"]


OPERATOR = Operator(Opaque, False, False, never_append_only, no_state, full_reasons)
