"""Filter (WHERE, HAVING): linear, stateless; monotone, so append-only over an append-only input."""

from __future__ import annotations

from mvengine.plan.nodes import Filter
from mvengine.plan.operators.base import Claim, Operator, no_reasons, no_state


def append_only(node: Filter, claim: Claim) -> bool:
    return claim(node.child)


OPERATOR = Operator(Filter, True, True, append_only, no_state, no_reasons)
