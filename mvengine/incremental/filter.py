"""Filter is linear: the changes that pass the predicate are the filter's changes."""

from __future__ import annotations

from typing import TypeVar

from mvengine.incremental.engine import Engine
from mvengine.plan.nodes import Filter

NODE = Filter  # the plan node type this module maintains (plan/operators/filter.py)

R = TypeVar("R")


def rule(node: Filter, engine: Engine[R]) -> R:
    return engine.mask(engine.child(node.child), node.child, node.predicate)
