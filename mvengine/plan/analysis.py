"""What a plan means for maintenance: full-refresh reasons, changelog kind, and the state a view keeps.

Changelog kinds follow the dynamic-tables paper: a view is append-only when its inputs are append-only and none of
its operators ever retracts a row it emitted; otherwise its changes are upserts when it has a unique key, and
retractions (+I/-D of whole rows) when it is a bag.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from mvengine.plan.functions import NON_DETERMINISTIC, function_name
from mvengine.plan.nodes import Aggregate, Distinct, Filter, LookupJoin, Node, Project, Scan, UnionAll, show
from mvengine.plan.operators import operator_of
from mvengine.plan.time_bounds import CLOCK, clock_bounds


@dataclass(frozen=True)
class State:
    description: str
    bounded: bool


def full_refresh_reasons(root: Node) -> list[str]:
    """Why the incremental compiler cannot maintain this plan; empty when it can."""
    reasons: list[str] = []

    def add(reason: str) -> None:
        if reason not in reasons:
            reasons.append(reason)

    for node in root.walk():
        operator = operator_of(node)
        if operator is None:
            add(f"{type(node).__name__} has no incremental rule")
            continue
        for reason in operator.full_reasons(node, is_append_only):
            add(reason)
        inputs = tuple(f for child in node.children for f in child.fields)
        # (a lookup join reads its facts' arrival time; its dimension may change as it likes)
        arriving = (node.left,) if isinstance(node, LookupJoin) else node.children
        if any(
            c.meta.get("proctime") for e in node.expressions() for c in e.find_all(exp.Column)
        ) and not all(is_append_only(child) for child in arriving):
            add(
                "PROCTIME() over an input that updates or deletes rows (a retraction's time would not match the "
                "row's)"
            )
        temporal = isinstance(node, Filter) and clock_bounds(node) is not None
        for e in node.expressions():
            for f in e.find_all(exp.Func):
                if function_name(f) in NON_DETERMINISTIC and not (temporal and function_name(f) in CLOCK):
                    add(f"non-deterministic function {function_name(f)}()")
            for window in e.find_all(exp.Window):
                add(f"window function {show(window, inputs)}")
            if e.find(exp.Query) is not None:
                add("a subquery inside an expression")
    return reasons


def by_arrival(root: Node) -> str | None:
    """What in the plan depends on when rows arrived (PROCTIME(), FIRST/LAST), which only its batches know: a
    full computation cannot know it (None when nothing does)."""
    from mvengine.plan.operators.aggregate import ARRIVAL, aggregate_call

    for node in root.walk():
        if any(c.meta.get("proctime") for e in node.expressions() for c in e.find_all(exp.Column)):
            return "PROCTIME()"
        if isinstance(node, Aggregate) and any(
            getattr(aggregate_call(a), "kind", None) in ARRIVAL for a in node.aggregates
        ):
            return "FIRST/LAST by arrival"
    return None


def is_append_only(node: Node) -> bool:
    """True when the node's output can only ever gain rows, whatever its inputs do within their own claims.

    Sound by construction, node by node: a source is append-only when declared so, a view when its own plan
    says so; filters, projections, DISTINCT, UNION ALL and inner, cross and semi joins are monotone (more input
    rows never take an output row away) unless an expression in them reads something that can change its
    value for rows already emitted: a window function (a new row changes its partition's values), a subquery
    (its result moves with tables the node does not otherwise read) or a non-deterministic function. Everything
    else (aggregates, outer and anti joins, top-N, opaque nodes) can retract.
    """
    if any(_reads_beyond_row(e) for e in node.expressions()):
        return False
    operator = operator_of(node)
    return operator is not None and operator.append_only(node, is_append_only)


def row_by_row(root: Node) -> bool:
    """Whether each output row comes of one input row alone (scans, projections, filters without NOW(), UNION
    ALL): a batch that only inserts then appends its own rows, which recomputing the view never beats."""
    return all(
        (isinstance(n, (Scan, Project, UnionAll)) or (isinstance(n, Filter) and clock_bounds(n) is None))
        and not any(_reads_beyond_row(e) for e in n.expressions())
        for n in root.walk()
    )


def _reads_beyond_row(e: exp.Expression) -> bool:
    """Whether the expression's value for a row can change after the row was emitted."""
    return (
        e.find(exp.Window) is not None
        or e.find(exp.Query) is not None
        or any(function_name(f) in NON_DETERMINISTIC for f in e.find_all(exp.Func))
    )


def key_is_guaranteed(root: Node) -> bool:
    """True when the view's key is unique by construction: it comes from a GROUP BY, a DISTINCT, or another
    view's key (checked when that view was refreshed), not from a source's PRIMARY KEY, which is NOT ENFORCED."""
    origin = _key_origin(root)
    return changes_once_per_key(root) or (isinstance(origin, Scan) and origin.input_kind == "view")


def changes_once_per_key(root: Node) -> bool:
    """True when the view's key comes from a GROUP BY or DISTINCT under nothing but filters and projections:
    a batch's changes then hold at most one old and one new row per key, with no duplicates to cancel out."""
    return root.key is not None and isinstance(_key_origin(root), (Aggregate, Distinct))


def _key_origin(root: Node) -> Node:
    node = root
    while isinstance(node, (Filter, Project)):
        node = node.child
    return node


def changelog_kind(root: Node, deterministic: bool) -> str:
    """A deterministic view whose plan is append-only (see is_append_only) only ever gains rows, whether it is
    maintained incrementally or recomputed: a recomputation of a monotone query over inputs that only grew is a
    superset of the last one, so its changelog holds `+I` rows only. `deterministic` is False for what the plan
    does not show (TABLESAMPLE)."""
    if deterministic and is_append_only(root):
        return "append-only"
    return "upsert" if root.key is not None else "retract"


def is_deterministic(root: Node) -> bool:
    return not any(
        function_name(f) in NON_DETERMINISTIC
        for node in root.walk()
        for e in node.expressions()
        for f in e.find_all(exp.Func)
    )


def state_of(root: Node, strategy: str, purged: bool = False) -> State:
    """The state the view's incremental rule keeps, in words, and whether it stays bounded. `purged`: the view
    allows a lateness, past which its windows' state is dropped (seed 001's bounded state)."""
    if strategy == "full":
        return State("none (recomputed in full on every refresh)", True)
    parts: list[str] = []
    bounded = True
    for node in root.walk():
        operator = operator_of(node)
        found = operator.state(node, is_append_only, purged) if operator is not None else None
        if found is not None and found[0] not in parts:
            parts.append(found[0])
            bounded = bounded and found[1]
    return State("; ".join(parts) if parts else "none", bounded)
