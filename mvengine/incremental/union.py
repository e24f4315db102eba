"""UNION ALL is linear: the union of its branches' changes, column by column position."""

from __future__ import annotations

from typing import TypeVar

from mvengine.incremental.engine import Engine
from mvengine.plan.nodes import UnionAll

NODE = UnionAll  # the plan node type this module maintains (plan/operators/union.py)

R = TypeVar("R")


def rule(node: UnionAll, engine: Engine[R]) -> R:
    return engine.union([engine.child(branch) for branch in node.inputs], node.inputs, node.fields)
