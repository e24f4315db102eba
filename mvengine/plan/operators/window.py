"""WindowAssign: each row's event-time windows (plan/windows.py). Tumbling and hopping windows are linear (a
row's windows depend on its own time only), stateless, and append-only over an append-only input; a session
window is maintained with the aggregate over it (operators/session.py), never on its own."""

from __future__ import annotations

from mvengine.plan.nodes import WindowAssign
from mvengine.plan.operators.base import Claim, Operator, no_reasons, no_state


def append_only(node: WindowAssign, claim: Claim) -> bool:
    return node.spec.kind != "session" and claim(node.child)


OPERATOR = Operator(WindowAssign, True, True, append_only, no_state, no_reasons)
