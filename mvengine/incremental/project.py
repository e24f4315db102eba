"""Projection is linear: each change row is projected, keeping its weight and time."""

from __future__ import annotations

from typing import TypeVar

from mvengine.incremental.engine import Engine
from mvengine.plan.nodes import Project

NODE = Project  # the plan node type this module maintains (plan/operators/project.py)

R = TypeVar("R")


def rule(node: Project, engine: Engine[R]) -> R:
    return engine.project(engine.child(node.child), node.child, node.projections, node.fields)
