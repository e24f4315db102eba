"""Scan: the changes of a source or an upstream view, as its change data feed gives them."""

from __future__ import annotations

from typing import TypeVar

from mvengine.incremental.engine import Engine
from mvengine.plan.nodes import Scan

NODE = Scan  # the plan node type this module maintains (plan/operators/scan.py)

R = TypeVar("R")


def rule(node: Scan, engine: Engine[R]) -> R:
    return engine.changes(node)
