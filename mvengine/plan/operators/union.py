"""UNION ALL: linear (the sum of its inputs' changes), stateless; append-only when every input is."""

from __future__ import annotations

from mvengine.plan.nodes import UnionAll
from mvengine.plan.operators.base import Claim, Operator, no_reasons, no_state


def append_only(node: UnionAll, claim: Claim) -> bool:
    return all(claim(c) for c in node.inputs)


OPERATOR = Operator(UnionAll, True, True, append_only, no_state, no_reasons)
