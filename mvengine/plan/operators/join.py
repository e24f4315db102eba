"""Join (inner, outer, semi, anti, by equalities): the changes of each side joined with the other side as it was
before the batch, and with each other (each side is read at the batch's input versions: no state). Inner, cross
and semi joins are monotone (append-only over append-only inputs); outer and anti joins retract (a first match
retracts a NULL-padded row)."""

from __future__ import annotations

from mvengine.plan.nodes import Aggregate, Distinct, Join, Over, TopN
from mvengine.plan.operators.base import Claim, Operator
from mvengine.plan.time_bounds import join_time_bound


def append_only(node: Join, claim: Claim) -> bool:
    return node.kind in ("inner", "cross", "semi") and all(claim(c) for c in node.children)


def state(node: Join, claim: Claim, purged: bool) -> tuple[str, bool]:
    bound = join_time_bound(node)
    if bound is not None:
        kind = "window join" if bound.windows else "interval join" if bound.low != bound.high else "join"
        kind = kind if node.kind == "inner" else f"{node.kind} {kind}"
        text = f"{kind} ({bound.describe()}): none (each side read at the batch's input versions, "
        return text + "within the times the other side's changes can meet)", True
    return "join: none (each side read at the batch's input versions)", True


def full_reasons(node: Join, claim: Claim) -> list[str]:
    reasons = []
    if not node.equi:
        reasons.append("a join without an equality condition (cross join)")
    if node.null_aware:
        reasons.append("NOT IN (subquery) returns no rows once the subquery yields a NULL: write NOT EXISTS")
    if node.kind in ("semi", "anti") and node.conditions()[2]:
        article = "an" if node.kind == "anti" else "a"
        reasons.append(
            f"{article} {node.kind} join whose ON condition compares the two sides other than by equality"
        )
    for side in node.children:  # (a subquery in FROM is made a view of its own: project/join_inputs.py)
        if any(isinstance(n, (Aggregate, Distinct, TopN, Over)) for n in side.walk()):
            reasons.append(
                "an aggregate, DISTINCT or window function inside a join's input that is not a subquery "
                "in FROM (a CTE, say): make it a view of its own, and join the view"
            )
    return reasons


OPERATOR = Operator(Join, True, True, append_only, state, full_reasons)
