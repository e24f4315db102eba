"""The operators mvengine maintains, one module each: for a plan node type (plan/nodes.py), everything the
planner must know to maintain it incrementally, in one place:

- `rule`: the module of its delta rules (`delta` on Spark DataFrames; `driver_delta` on Arrow when `on_driver`);
- `append_only(node, claim)`: whether its output only ever gains rows, given `claim(child)` for its inputs;
- `state(node, claim, purged)`: the state its rule keeps, in words, and whether that stays bounded (None: none);
- `full_reasons(node)`: why it cannot be maintained incrementally (empty: it can).

plan/analysis.py asks these for every node of a plan; incremental/compiler.py and driver_support.py find the
rules here. A node type without an operator is a planning error (tests/unit/test_operators.py checks each has one).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mvengine.plan.nodes import Node

Claim = Callable[[Node], bool]  # is_append_only, for an operator's inputs


@dataclass(frozen=True)
class Operator:
    node: type[Node]
    rule: str | None
    on_driver: bool
    append_only: Callable[[Node, Claim], bool]
    state: Callable[[Node, Claim, bool], tuple[str, bool] | None]
    full_reasons: Callable[[Node], list[str]]


def never_append_only(node: Node, claim: Claim) -> bool:
    return False


def no_state(node: Node, claim: Claim, purged: bool) -> None:
    return None


def no_reasons(node: Node) -> list[str]:
    return []


def _registry() -> dict[type[Node], Operator]:
    from mvengine.plan.operators import (
        aggregate,
        distinct,
        filter,
        join,
        limit,
        opaque,
        over,
        project,
        scan,
        session,
        top_n,
        union,
        window,
    )
    modules = (scan, filter, project, aggregate, session, distinct, union, join, window, limit, top_n, over,
               opaque)
    return {m.OPERATOR.node: m.OPERATOR for m in modules}


_OPERATORS: dict[type[Node], Operator] = {}


def operators() -> dict[type[Node], Operator]:
    """Every operator, by the node type it maintains."""
    if not _OPERATORS:
        _OPERATORS.update(_registry())
    return _OPERATORS


def operator_of(node: Node) -> Operator | None:
    """The operator of a node's exact type (a subclass, such as SessionAggregate, is an operator of its own)."""
    return operators().get(type(node))
