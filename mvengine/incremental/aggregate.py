"""GROUP BY aggregates (seed 003): per-group accumulators in state, and a change only for groups whose output
changed — `-old +new` for an update, `+new` for a group's first row, `-old` when its row count reaches zero.

State table `n<i>_acc`: the group columns, `_n` (rows in the group), and each aggregate's accumulators
(incremental/accumulators.py declares each aggregate's, its math in its docstring); the values of MIN/MAX over an
input that deletes, and of DISTINCT aggregates, are counted in a multiset table `n<i>_ms<j>` (group, value,
count). An aggregate without GROUP BY has one row, which exists even when its input is empty (COUNT = 0,
SUM = NULL).

With the view's state_ttl, the accumulators also hold `_touched` (the clock of the batch that last changed the
group): a group untouched for the TTL is retracted from its old accumulators and leaves state, multisets
included; a group without state is counted from its input rows before the batch as well, so that one coming
back after it expired is exact.
"""

from __future__ import annotations

from typing import TypeVar

from sqlglot import exp

from mvengine.incremental.accumulators import (
    COUNT,
    OLD,
    OLD_EXISTS,
    SAME,
    Accumulator,
    accumulator,
    counts_values_only,
    merged,
    new_result,
    old_result,
    partial,
    rolled_up,
    rolls_up,
    state_columns,
)
from mvengine.incremental.engine import Engine
from mvengine.incremental.state import TOUCHED
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
    clock = engine.clock()
    ttl = clock is not None and clock.state_ttl is not None
    if ttl:  # (a key is touched when its rows change: rows that cancel out touch nothing)
        rows = engine.consolidate(rows, [*groups, *column.values()])
        rows = _with_returning_groups(engine, node, rows, groups, column, named, table)
    # 1. What this batch adds to each affected group's accumulators; and the counts of each multiset's values
    # per group. With one multiset whose partials add up, both come of one pass over the rows: the partials by
    # group and value, rolled up by group.
    multiset_tables = [f"n{engine.node_id(node)}_ms{j}" for j in range(len(multisets))]
    values: list[R | None] | None = None  # the values of each multiset's aggregates per group (None: below)
    if len(multisets) == 1 and rolls_up(aggs):
        x = column[multisets[0]]
        fine = engine.keep(partial(engine, rows, [*groups, x], aggs, column))
        valued = engine.where(fine, f"{quote(x)} IS NOT NULL")  # (one row per group and value already)
        counted = [engine.select(engine.rename(valued, {x: VALUE}), [*groups, VALUE, COUNT])]
        if _starts_empty(engine, multiset_tables[0], aggs):
            # The multiset holds the batch's values alone, and its aggregates are the roll-up's own: no merge
            # with the values before, nor a join of its aggregates to the accumulators.
            present = engine.compute(fine, {VALUE: f"CASE WHEN {quote(COUNT)} > 0 THEN {quote(x)} END"})
            wanted = {a.value: (str(a.how), VALUE) for a in aggs if a.how is not None and a.multiset == 0}
            added = rolled_up(engine, present, groups, aggs, wanted)
            staged = engine.compute(engine.where(counted[0], f"{quote(COUNT)} > 0"), {DELETE: "false"})
            engine.stage(multiset_tables[0], staged, [*groups, VALUE], [COUNT], DELETE)
            values = [None]
        else:
            added = rolled_up(engine, fine, groups, aggs)
    else:
        if multisets:  # read again by each multiset
            rows = engine.keep(rows)
        added = partial(engine, rows, groups, aggs, column)
        counted = [_counts(engine, rows, groups, column[argument]) for argument in multisets]
    if multisets and values is None:  # (read again by the multisets)
        added = engine.keep(added)
    # ...and the groups the view's state_ttl expires: untouched for that long, they leave the view.
    expired = engine.expired(table, groups, added) if ttl else None

    # 2. Values held in multisets (MIN/MAX that must survive deletes, DISTINCT aggregates).
    if values is None:
        values = [
            _multiset_values(engine, name, counts, added, groups, aggs, j, expired)
            for j, (name, counts) in enumerate(zip(multiset_tables, counted))
        ]

    # 3. The accumulators before and after the batch, and the results from each.
    new = engine.keep(merged(engine, added, table, groups, aggs, values))

    # 4. State: the new accumulators; a group whose count reached zero is deleted (a global one is kept).
    deleted = f"{quote(COUNT)} = 0" if groups else "false"
    # (A group that came and went within the batch has nothing to delete: delta-rs's MERGE rejects such rows.)
    kept = engine.compute(engine.where(new, f"NOT ({deleted}) OR {OLD_EXISTS}"), {DELETE: deleted})
    columns = state_columns(aggs)
    if ttl:  # (the time a group was last touched tells when it expires)
        assert clock is not None
        columns = [*columns, TOUCHED]
        kept = engine.compute(kept, {TOUCHED: f"CAST({clock.now} AS BIGINT)"})
        if expired is not None:
            gone = engine.compute(expired, {DELETE: "true"})
            kept = engine.concat([engine.select(r, [*groups, *columns, DELETE]) for r in (kept, gone)])
    engine.stage(table, kept, groups, columns, DELETE)

    # 5. Output: -old +new for groups whose output changed.
    exists = f"{quote(COUNT)} > 0" if groups else "true"
    changed = f"NOT ({OLD_EXISTS} AND {exists} AND {SAME})"
    new = engine.compute(
        new, {"_retract": f"{OLD_EXISTS} AND {changed}", "_insert": f"{exists} AND {changed}"}
    )
    old_values = [old_result(i) for i in range(len(aggs))]
    new_values = [new_result(i) for i in range(len(aggs))]
    outputs = [f.name for f in node.fields]
    changes = engine.updates(
        new, [*groups, *old_values], [*groups, *new_values], outputs, "_retract", "_insert"
    )
    if expired is None:
        return changes
    assert clock is not None
    old = engine.compute(
        engine.rename(expired, {c: OLD + c for c in state_columns(aggs)}),
        {
            **{old_result(i): a.result_of(lambda c: OLD + c) for i, a in enumerate(aggs)},
            MTIME: f"timestamp_micros({clock.now})",
            "_retract": "true",
            "_insert": "false",
        },
    )
    leaving = engine.updates(
        old, [*groups, *old_values], [*groups, *old_values], outputs, "_retract", "_insert"
    )
    return engine.concat([changes, leaving])


def _with_returning_groups(
    engine: Engine[R],
    node: Aggregate,
    rows: R,
    groups: list[str],
    column: dict[str, str],
    named: dict[str, exp.Expression],
    table: str,
) -> R:
    """`rows` and, for each group of theirs without state (new, or back after the view's state_ttl expired
    it), the input's rows of that group before the batch, as inserts: such a group is counted from all its
    rows, as a recomputation counts it, not from this batch's alone."""
    touched = engine.aggregate(rows, {g: g for g in groups}, {"_k": ("sum", WEIGHT)})
    keys = engine.select(touched, groups)
    held = engine.select(engine.read_state(table, keys, groups, keys), groups)
    missing = engine.keep(engine.lookup(keys, [(g, g) for g in groups], held, "anti", null_safe=True))
    if not engine.any_rows(missing):
        return rows
    before = engine.before(node.child, list(node.groups), [(missing, groups)], null_safe=True)
    if before is None:
        return rows
    prior = engine.select(engine.keyed(before, node.child, named, None), [*named, WEIGHT, MTIME])
    prior = engine.compute(prior, {g: f"_g{i}" for i, g in enumerate(groups)})
    prior = engine.select(prior, [*groups, *column.values(), WEIGHT, MTIME])
    prior = engine.lookup(prior, [(g, g) for g in groups], missing, "semi", null_safe=True)
    return engine.concat([rows, prior])


def _describe(node: Aggregate) -> tuple[list[Accumulator], list[str]]:
    """The accumulators of the node's aggregates, and the distinct arguments that need a multiset."""
    multisets: list[str] = []
    append_only = is_append_only(node.child)
    aggs = [
        accumulator(i, call, type_name(f.type), append_only, multisets)
        for i, (call, f) in enumerate(zip(node.aggregates, node.fields[len(node.groups) :]))
    ]
    return aggs, multisets


def _starts_empty(engine: Engine[R], table: str, aggs: list[Accumulator]) -> bool:
    """Whether multiset table `table` (the only one) starts the batch empty, and its aggregates are of its
    values without their counts (not COLLECT_LIST, one copy per count)."""
    return not engine.holds_state(table) and all(a.how != "list" for a in aggs)


def _counts(engine: Engine[R], rows: R, groups: list[str], x: str) -> R:
    """What the batch adds to the count of each (group, value `x`) of a multiset: NULL is no value, and is not
    counted."""
    valued = engine.where(rows, f"{quote(x)} IS NOT NULL")
    return engine.aggregate(valued, {**{g: g for g in groups}, VALUE: x}, {COUNT: ("sum", WEIGHT)})


def _multiset_values(
    engine: Engine[R],
    table: str,
    counted: R,
    partial: R,
    groups: list[str],
    aggs: list[Accumulator],
    j: int,
    expired: R | None,
) -> R:
    """Apply the batch's counts (`_counts`) to multiset j (group, value, count), and compute per affected group
    that has values the aggregates that read it (MIN, MAX, COUNT DISTINCT, SUM DISTINCT, COLLECT_LIST) over the
    values whose count is positive; for a multiset of COUNT(DISTINCT) alone, how much each count changes, from
    the batch's own values (accumulators.counts_values_only). The values of `expired` groups are deleted."""
    keys = [*groups, VALUE]
    by_group = {g: g for g in groups}
    counts_only = counts_values_only(aggs, j)
    if counts_only:
        old = engine.read_state(table, engine.empty(counted), keys, counted)
    else:
        old = engine.read_state(table, engine.empty(counted), groups, partial)
    flags = {"_touched": ("1", "0"), "_existed": ("0", "1")}
    if counts_only:  # (the count before the batch tells which values enter and leave)
        flags["_before"] = ("CAST(0 AS BIGINT)", quote(COUNT))
    flagged = [
        engine.compute(r, {name: values[side] for name, values in flags.items()})
        for side, r in enumerate((counted, old))
    ]
    how = {"_touched": "max", "_existed": "max", "_before": "sum"}
    merged = engine.keep(
        engine.aggregate(
            engine.concat(flagged),
            {k: k for k in keys},
            {COUNT: ("sum", COUNT), **{name: (how[name], name) for name in flags}},
        )
    )
    gone = f"{quote(COUNT)} <= 0"
    staged = engine.compute(
        engine.where(merged, f"_touched = 1 AND (NOT ({gone}) OR _existed = 1)"), {DELETE: gone}
    )
    if expired is not None:
        values = engine.read_state(table, engine.empty(counted), groups, expired)
        staged = engine.concat(
            [
                engine.select(r, [*keys, COUNT, DELETE])
                for r in (staged, engine.compute(values, {DELETE: "true"}))
            ]
        )
    engine.stage(table, staged, keys, [COUNT], DELETE)

    wanted = [a for a in aggs if a.how is not None and a.multiset == j]
    if counts_only:  # +1 for a value whose count turned positive, -1 for one whose count left it
        n = quote(COUNT)
        step = f"CASE WHEN _before <= 0 AND {n} > 0 THEN 1 WHEN _before > 0 AND {n} <= 0 THEN -1 ELSE 0 END"
        steps = engine.compute(merged, {"_step": step})
        return engine.aggregate(steps, by_group, {a.value: ("sum", "_step") for a in wanted})
    present = engine.where(merged, f"{quote(COUNT)} > 0")
    plain = {a.value: (str(a.how), VALUE) for a in wanted if a.how != "list"}
    lists = {a.value: ("sorted_list", VALUE) for a in wanted if a.how == "list"}
    parts = [engine.aggregate(present, by_group, plain)] if plain else []
    if lists:  # each value as often as its count
        parts.append(engine.aggregate(engine.copies(present, COUNT), by_group, lists))
    if len(parts) == 1:
        return parts[0]
    return engine.lookup(parts[0], [(g, g) for g in groups], parts[1], "left", null_safe=True)
