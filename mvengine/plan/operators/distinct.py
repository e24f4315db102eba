"""SELECT DISTINCT: a row's multiplicity is kept per distinct row; a row enters when its count rises from zero
and leaves when it falls back. Monotone (append-only over an append-only input); its state grows with the
distinct rows."""

from __future__ import annotations

from mvengine.plan.nodes import Distinct
from mvengine.plan.operators.base import Claim, Operator, no_reasons


def append_only(node: Distinct, claim: Claim) -> bool:
    return claim(node.child)


def state(node: Distinct, claim: Claim, purged: bool) -> tuple[str, bool]:
    return "per distinct row: count", False


OPERATOR = Operator(Distinct, True, True, append_only, state, no_reasons)
