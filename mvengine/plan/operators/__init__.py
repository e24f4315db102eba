"""The operators mvengine maintains, one module each: for a plan node type (plan/nodes.py), everything the
planner must know to maintain it incrementally, in one place:

- `incremental`: whether it has a delta rule (the rule's module, incremental/<name>.py, names the node type it
  maintains, and incremental/compiler.py lists the modules), and `on_driver`: whether the driver runs it too;
- `append_only(node, claim)`: whether its output only ever gains rows, given `claim(child)` for its inputs;
- `state(node, claim, purged)`: the state its rule keeps, in words, and whether that stays bounded (None: none);
- `full_reasons(node)`: why it cannot be maintained incrementally (empty: it can).

plan/analysis.py asks these for every node of a plan, and driver_support.py whether the driver runs a
node. A node type without an operator is a planning error (tests/unit/test_operators.py checks each has one).
"""

from __future__ import annotations

from mvengine.plan.nodes import Node
from mvengine.plan.operators import (
    aggregate,
    distinct,
    filter,
    join,
    limit,
    lookup_join,
    opaque,
    over,
    project,
    scan,
    session,
    temporal_join,
    top_n,
    union,
    window,
)
from mvengine.plan.operators.base import AnyOperator

_MODULES = (
    scan,
    filter,
    project,
    aggregate,
    session,
    distinct,
    union,
    join,
    temporal_join,
    lookup_join,
    window,
    limit,
    top_n,
    over,
    opaque,
)
# Every operator, by the node type it maintains.
_OPERATORS: dict[type[Node], AnyOperator] = {m.OPERATOR.node: m.OPERATOR for m in _MODULES}


def operators() -> dict[type[Node], AnyOperator]:
    """Every operator, by the node type it maintains."""
    return _OPERATORS


def operator_summaries() -> dict[type[Node], str]:
    """What each operator does, in its module's first paragraph (the SQL reference lists them)."""
    return {
        m.OPERATOR.node: " ".join((m.__doc__ or "").split("\n\n")[0].split()).rstrip(":") for m in _MODULES
    }


def operator_of(node: Node) -> AnyOperator | None:
    """The operator of a node's exact type (a subclass, such as SessionAggregate, is an operator of its own)."""
    return _OPERATORS.get(type(node))


def has_delta_rules(root: Node) -> bool:
    """Whether every operator of the plan has a delta rule (incremental/compiler.py applies them)."""
    return all((o := operator_of(node)) is not None and o.incremental for node in root.walk())
