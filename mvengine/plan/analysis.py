"""What a plan means for maintenance: full-refresh reasons, changelog kind, and the state a view keeps.

Changelog kinds follow the dynamic-tables paper: a view is append-only when its inputs are append-only and none of
its operators ever retracts a row it emitted; otherwise its changes are upserts when it has a unique key, and
retractions (+I/-D of whole rows) when it is a bag.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from mvengine.plan.nodes import (
    Aggregate,
    Distinct,
    Filter,
    Join,
    Node,
    Opaque,
    Project,
    Scan,
    SessionAggregate,
    UnionAll,
    WindowAssign,
    show,
)

# Functions whose result changes from one run to the next: a view using them can only be recomputed.
NON_DETERMINISTIC = frozenset({
    "rand", "randn", "random", "uuid", "shuffle", "current_timestamp", "current_date", "now", "localtimestamp",
    "unix_timestamp", "monotonically_increasing_id", "spark_partition_id", "input_file_name",
    "input_file_block_start", "input_file_block_length", "randstr", "uniform", "current_user", "user",
    "session_user", "current_time",
})
# Aggregates maintained incrementally (with or without DISTINCT for COUNT and SUM).
INCREMENTAL_AGGREGATES = (exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max)


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
        if isinstance(node, Opaque):
            add(node.reason)
        if isinstance(node, Join):
            for reason in _join_reasons(node):
                add(reason)
        if isinstance(node, Aggregate):
            for agg in node.aggregates:
                reason = _aggregate_reason(agg, node.child.fields)
                if reason:
                    add(reason)
        inputs = tuple(f for child in node.children for f in child.fields)
        if any(c.meta.get("proctime") for e in node.expressions() for c in e.find_all(exp.Column)) \
                and not all(is_append_only(child) for child in node.children):
            add("PROCTIME() over an input that updates or deletes rows (a retraction's time would not match the "
                "row's)")
        for e in node.expressions():
            for f in e.find_all(exp.Func):
                if _function_name(f) in NON_DETERMINISTIC:
                    add(f"non-deterministic function {_function_name(f)}()")
            for window in e.find_all(exp.Window):
                add(f"window function {show(window, inputs)}")
            if e.find(exp.Query) is not None:
                add("a subquery inside an expression")
    return reasons


def _join_reasons(node: Join) -> list[str]:
    reasons = []
    if not node.equi:
        reasons.append("a join without an equality condition (cross join)")
    if node.null_aware:
        reasons.append("NOT IN (subquery) returns no rows once the subquery yields a NULL: write NOT EXISTS")
    if node.kind != "inner" and node.conditions()[2]:
        reasons.append(f"a {node.kind} join whose ON condition compares the two sides other than by equality")
    for side in node.children:
        if any(isinstance(n, (Aggregate, Distinct)) for n in side.walk()):
            reasons.append("an aggregate or DISTINCT inside a join's input: make that subquery a view of its own, "
                           "and join the view")
    return reasons


def _aggregate_reason(agg: exp.Expression, inputs) -> str | None:
    if isinstance(agg, exp.Filter):
        return f"aggregate with a FILTER clause ({show(agg, inputs)})"
    if not isinstance(agg, INCREMENTAL_AGGREGATES):
        return f"aggregate {_function_name(agg)}() is not maintained incrementally"
    if isinstance(agg.this, exp.Distinct):
        if not isinstance(agg, (exp.Count, exp.Sum)):
            return f"{_function_name(agg).upper()}(DISTINCT ...) is not maintained incrementally"
        if len(agg.this.expressions) != 1:
            return "COUNT(DISTINCT ...) of several columns is not maintained incrementally"
    return None


def _function_name(f: exp.Expression) -> str:
    """The function's name as Spark SQL spells it (sqlglot's own class names differ, e.g. for
    percentile_approx)."""
    if isinstance(f, exp.Anonymous):
        return str(f.this).lower()
    return f.sql("spark").split("(", 1)[0].strip().lower()


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
    if isinstance(node, Scan):
        return node.append_only
    if isinstance(node, (Filter, Project, Distinct)):
        return is_append_only(node.children[0])
    if isinstance(node, WindowAssign):
        return node.spec.kind != "session" and is_append_only(node.child)
    if isinstance(node, UnionAll):
        return all(is_append_only(c) for c in node.inputs)
    if isinstance(node, Join):
        return node.kind in ("inner", "cross", "semi") and all(is_append_only(c) for c in node.children)
    return False


def _reads_beyond_row(e: exp.Expression) -> bool:
    """Whether the expression's value for a row can change after the row was emitted."""
    return (e.find(exp.Window) is not None or e.find(exp.Query) is not None
            or any(_function_name(f) in NON_DETERMINISTIC for f in e.find_all(exp.Func)))


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
    return not any(_function_name(f) in NON_DETERMINISTIC
                   for node in root.walk() for e in node.expressions() for f in e.find_all(exp.Func))


def state_of(root: Node, strategy: str, purged: bool = False) -> State:
    """The state the view's incremental rule keeps, in words, and whether it stays bounded. `purged`: the view
    allows a lateness, past which its windows' state is dropped (seed 001's bounded state)."""
    if strategy == "full":
        return State("none (recomputed in full on every refresh)", True)
    parts: list[str] = []
    bounded = True
    for node in root.walk():
        if isinstance(node, SessionAggregate):
            groups = [show(g, node.child.fields) for g in node.groups
                      if not (isinstance(g, exp.Column) and g.table == node.window.spec.qualifier)]
            parts.append(f"per partition ({', '.join(groups) or 'one'}): its input rows, to re-form its sessions")
            bounded = False
        elif isinstance(node, Aggregate):
            text, node_bounded = _aggregate_state(node)
            if purged and windowed(node) is not None:
                text, node_bounded = f"{text}, dropped once the watermark is past a window's end and the lateness", True
            parts.append(text)
            bounded = bounded and node_bounded
        elif isinstance(node, Distinct):
            parts.append("per distinct row: count")
            bounded = False
        elif isinstance(node, Join) and "join: none (each side read at the batch's input versions)" not in parts:
            parts.append("join: none (each side read at the batch's input versions)")
    return State("; ".join(parts) if parts else "none", bounded)


def windowed(node: Node) -> WindowAssign | None:
    """The fixed-size window (tumbling or hopping) an aggregate groups by, directly over it; None otherwise."""
    if isinstance(node, Aggregate) and not isinstance(node, SessionAggregate) and isinstance(node.child, WindowAssign):
        return node.child
    return None


def _aggregate_state(node: Aggregate) -> tuple[str, bool]:
    append_only = is_append_only(node.child)
    items: list[str] = ["count"]
    bounded = not node.groups
    for agg in node.aggregates:
        inner = agg.this if isinstance(agg, exp.Filter) else agg
        arg = inner.this
        distinct = isinstance(arg, exp.Distinct)
        inputs = node.child.fields
        value = show(arg.expressions[0], inputs) if distinct and arg.expressions else (
            show(arg, inputs) if isinstance(arg, exp.Expression) else "*")
        if distinct:
            new = [f"count per distinct {value}"]
            bounded = False
        elif isinstance(inner, exp.Count):
            new = [] if value == "*" or isinstance(arg, exp.Star) else [f"count({value})"]
        elif isinstance(inner, (exp.Sum, exp.Avg)):
            new = [f"sum({value})", f"count({value})"]
        elif isinstance(inner, (exp.Min, exp.Max)):
            if append_only:
                new = [f"{_function_name(inner)}({value})"]
            else:
                new = [f"min/max multiset of {value}"]
                bounded = False
        else:
            new = [show(inner, inputs)]
        items.extend(i for i in new if i not in items)
    where = f"per group ({', '.join(show(g, node.child.fields) for g in node.groups)})" if node.groups else "one row"
    return f"{where}: {', '.join(items)}", bounded
