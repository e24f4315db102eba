"""What an operator is (plan/operators/__init__.py lists them): the record each operator module fills in, and
the defaults most share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from mvengine.plan.nodes import Node

Claim = Callable[[Node], bool]  # is_append_only, for an operator's inputs
N = TypeVar("N", bound=Node)


@dataclass(frozen=True)
class Operator(Generic[N]):
    """The operator of node type N; its functions take nodes of that type (operator_of finds it by type)."""

    node: type[N]
    incremental: bool  # it has a delta rule (incremental/<name>.py names the node type it maintains)
    on_driver: bool  # ...which the driver runs too
    append_only: Callable[[N, Claim], bool]
    state: Callable[[N, Claim, bool], tuple[str, bool] | None]
    full_reasons: Callable[[N, Claim], list[str]]


AnyOperator = Operator[Any]


def never_append_only(node: Node, claim: Claim) -> bool:
    return False


def no_state(node: Node, claim: Claim, purged: bool) -> None:
    return None


def no_reasons(node: Node, claim: Claim) -> list[str]:
    return []
