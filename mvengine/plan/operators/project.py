"""Project (SELECT expressions): linear, stateless; append-only over an append-only input."""

from __future__ import annotations

from mvengine.plan.nodes import Project
from mvengine.plan.operators.base import Claim, Operator, no_reasons, no_state


def append_only(node: Project, claim: Claim) -> bool:
    return claim(node.child)


OPERATOR = Operator(Project, True, True, append_only, no_state, no_reasons)
