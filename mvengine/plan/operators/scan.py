"""Scan: a source's or an upstream view's changes, as its change data feed gives them. Append-only when the
source is declared so, or the view is planned so; no state."""

from __future__ import annotations

from mvengine.plan.nodes import Scan
from mvengine.plan.operators.base import Claim, Operator, no_reasons, no_state


def append_only(node: Scan, claim: Claim) -> bool:
    return node.append_only


OPERATOR = Operator(Scan, True, True, append_only, no_state, no_reasons)
