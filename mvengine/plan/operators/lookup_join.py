"""LookupJoin (`JOIN dim FOR SYSTEM_TIME AS OF f.proc`, a PROCTIME() column): each fact row joined to the dimension
as it is at the batch that brings the row. Like a join, it keeps no state: the dimension is read at the batch's
input versions for the keys of the new facts. A change of the dimension revises nothing, so over append-only
facts the view only gains rows (an outer lookup join's padded rows too)."""

from __future__ import annotations

from mvengine.plan.nodes import LookupJoin
from mvengine.plan.operators import join
from mvengine.plan.operators.base import Claim, Operator


def append_only(node: LookupJoin, claim: Claim) -> bool:
    return claim(node.left)


def state(node: LookupJoin, claim: Claim, purged: bool) -> tuple[str, bool]:
    return (
        "lookup join (the dimension as of each batch): none (the dimension read at the batch's input versions "
        "for the keys of the new facts; its own changes revise nothing)",
        True,
    )


def full_reasons(node: LookupJoin, claim: Claim) -> list[str]:
    return join.full_reasons(node, claim)


OPERATOR = Operator(LookupJoin, True, True, append_only, state, full_reasons)
