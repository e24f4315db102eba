"""GROUP BY aggregates (seed 003): per-group accumulators in state, and a change only for groups whose output
changed — `-old +new` for an update, `+new` for a group's first row, `-old` when its row count reaches zero.

State table `n<i>_acc`: the group columns, `_n` (rows in the group), and each aggregate's accumulators
(incremental/accumulators.py declares each aggregate's, its math in its docstring); the values of MIN/MAX over an
input that deletes, and of DISTINCT aggregates, are counted in a multiset table `n<i>_ms<j>` (group, value,
count). An aggregate without GROUP BY has one row, which exists even when its input is empty (COUNT = 0,
SUM = NULL).
"""

from __future__ import annotations

from typing import TypeVar

from mvengine.incremental.accumulators import (
    COUNT,
    OLD_EXISTS,
    SAME,
    Accumulator,
    accumulator,
    merged,
    new_result,
    old_result,
    partial,
    state_columns,
)
from mvengine.incremental.engine import Engine
from mvengine.incremental.zset import MTIME, WEIGHT, quote
from mvengine.plan.analysis import is_append_only
from mvengine.plan.nodes import Aggregate
from mvengine.plan.types import type_name

NODE = Aggregate  # the plan node type this module maintains (plan/operators/aggregate.py)

R = TypeVar("R")

DELETE = "_delete"
VALUE = "_value"  # a multiset's value column


def rule(node: Aggregate, engine: Engine[R]) -> R:
    groups = [f.name for f in node.fields[: len(node.groups)]]
    aggs, multisets = _describe(node)
    table = f"n{engine.node_id(node)}_acc"
    arguments = {
        a.argument: a.expression for a in aggs if a.argument is not None and a.expression is not None
    }
    column = {argument: f"_x{j}" for j, argument in enumerate(arguments)}
    # The groups' values named `_g<i>` first, then by the view: the child may hold columns of those names.
    named = {
        **{f"_g{i}": g for i, g in enumerate(node.groups)},
        **{column[a]: e for a, e in arguments.items()},
    }
    rows = engine.select(
        engine.keyed(engine.child(node.child), node.child, named, None), [*named, WEIGHT, MTIME]
    )
    rows = engine.compute(rows, {g: f"_g{i}" for i, g in enumerate(groups)})
    rows = engine.select(rows, [*groups, *column.values(), WEIGHT, MTIME])
    if multisets:  # read again by each multiset
        rows = engine.keep(rows)

    # 1. What this batch adds to each affected group's accumulators.
    added = partial(engine, rows, groups, aggs, column)
    if multisets:
        added = engine.keep(added)

    # 2. Values held in multisets (MIN/MAX that must survive deletes, DISTINCT aggregates).
    values = [
        _multiset_values(
            engine, f"n{engine.node_id(node)}_ms{j}", rows, added, groups, column[argument], aggs, j
        )
        for j, argument in enumerate(multisets)
    ]

    # 3. The accumulators before and after the batch, and the results from each.
    new = engine.keep(merged(engine, added, table, groups, aggs, values))

    # 4. State: the new accumulators; a group whose count reached zero is deleted (a global one is kept).
    deleted = f"{quote(COUNT)} = 0" if groups else "false"
    # (A group that came and went within the batch has nothing to delete: delta-rs's MERGE rejects such rows.)
    kept = engine.where(new, f"NOT ({deleted}) OR {OLD_EXISTS}")
    engine.stage(table, engine.compute(kept, {DELETE: deleted}), groups, state_columns(aggs), DELETE)

    # 5. Output: -old +new for groups whose output changed.
    exists = f"{quote(COUNT)} > 0" if groups else "true"
    changed = f"NOT ({OLD_EXISTS} AND {exists} AND {SAME})"
    new = engine.compute(
        new, {"_retract": f"{OLD_EXISTS} AND {changed}", "_insert": f"{exists} AND {changed}"}
    )
    old_values = [old_result(i) for i in range(len(aggs))]
    new_values = [new_result(i) for i in range(len(aggs))]
    outputs = [f.name for f in node.fields]
    return engine.updates(new, [*groups, *old_values], [*groups, *new_values], outputs, "_retract", "_insert")


def _describe(node: Aggregate) -> tuple[list[Accumulator], list[str]]:
    """The accumulators of the node's aggregates, and the distinct arguments that need a multiset."""
    multisets: list[str] = []
    append_only = is_append_only(node.child)
    aggs = [
        accumulator(i, call, type_name(f.type), append_only, multisets)
        for i, (call, f) in enumerate(zip(node.aggregates, node.fields[len(node.groups) :]))
    ]
    return aggs, multisets


def _multiset_values(
    engine: Engine[R],
    table: str,
    rows: R,
    partial: R,
    groups: list[str],
    x: str,
    aggs: list[Accumulator],
    j: int,
) -> R:
    """Apply the batch to multiset j (group, value, count), and compute per affected group that has values the
    aggregates that read it (MIN, MAX, COUNT DISTINCT, SUM DISTINCT, COLLECT_LIST) over the values whose count
    is positive."""
    keys = [*groups, VALUE]
    counted = engine.aggregate(rows, {**{g: g for g in groups}, VALUE: x}, {COUNT: ("sum", WEIGHT)})
    old = engine.read_state(table, engine.empty(counted), groups, partial)
    flagged = [
        engine.compute(r, {"_touched": t, "_existed": e})
        for r, t, e in ((counted, "1", "0"), (old, "0", "1"))
    ]
    merged = engine.keep(
        engine.aggregate(
            engine.concat(flagged),
            {k: k for k in keys},
            {COUNT: ("sum", COUNT), "_touched": ("max", "_touched"), "_existed": ("max", "_existed")},
        )
    )
    gone = f"{quote(COUNT)} <= 0"
    staged = engine.where(merged, f"_touched = 1 AND (NOT ({gone}) OR _existed = 1)")
    engine.stage(table, engine.compute(staged, {DELETE: gone}), keys, [COUNT], DELETE)

    present = engine.where(merged, f"{quote(COUNT)} > 0")
    wanted = [a for a in aggs if a.how is not None and a.multiset == j]
    by_group = {g: g for g in groups}
    plain = {a.value: (str(a.how), VALUE) for a in wanted if a.how != "list"}
    lists = {a.value: ("sorted_list", VALUE) for a in wanted if a.how == "list"}
    parts = [engine.aggregate(present, by_group, plain)] if plain else []
    if lists:  # each value as often as its count
        parts.append(engine.aggregate(engine.copies(present, COUNT), by_group, lists))
    if len(parts) == 1:
        return parts[0]
    return engine.lookup(parts[0], [(g, g) for g in groups], parts[1], "left", null_safe=True)
