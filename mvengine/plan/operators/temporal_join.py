"""TemporalJoin (`JOIN dim FOR SYSTEM_TIME AS OF f.ts`): each fact row joined to the dimension's version valid at
its time. Like a join, it keeps no state: the dimension's versions are its rows, read at the batch's input
versions. Not append-only: a version that arrives after facts of its time moves them to it."""

from __future__ import annotations

from mvengine.plan.nodes import TemporalJoin, show
from mvengine.plan.operators import join
from mvengine.plan.operators.base import Claim, Operator, never_append_only


def state(node: TemporalJoin, claim: Claim, purged: bool) -> tuple[str, bool]:
    inputs = node.left.fields + node.right.fields
    versions = f"versions by {show(node.version, inputs)}, as of {show(node.as_of, inputs)}"
    return (
        f"temporal join ({versions}): none (the dimension's versions read at the batch's input versions for "
        "the keys its changes carry; facts read again only for the keys and times a new version moves)",
        True,
    )


def full_reasons(node: TemporalJoin, claim: Claim) -> list[str]:
    return join.full_reasons(node, claim)


OPERATOR = Operator(TemporalJoin, True, True, never_append_only, state, full_reasons)
