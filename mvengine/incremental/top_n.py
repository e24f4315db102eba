"""TopN (plan/operators/top_n.py): the first N rows of each partition in an order, maintained from a prefix.

State, per partition (its `PARTITION BY` values `_p0, _p1, ...`; one partition without): `n<i>_top`, a prefix of
the partition's rows in the total order — the ORDER BY, then every column ascending, so that ROW_NUMBER is
deterministic — with their partition and multiplicity `_n`; and `n<i>_count`, the partition's row count. A
prefix is *complete* when it holds the whole partition.

A batch, for the partitions its changes touch:
1. merges the changes into the old prefix: a deleted row leaves it; an inserted row joins it when the prefix is
   complete, or when it sorts before the prefix's last row (after it, it is among rows the prefix never held);
2. where the result no longer shows the top N for sure (fewer than N rows left, or for RANK/DENSE_RANK no row
   ranked beyond N), reads the partition again from the input at the batch's version (the input before the batch
   plus its changes) — only possible when the input keeps no state of its own; otherwise the prefix is the whole
   partition;
3. keeps the first N + buffer rows (plan/operators/top_n.buffer_size; ties at rank N are kept whole);
4. emits the old top N of those partitions retracted and the new one inserted: rows that stay as they were
   cancel out, so only rows entering, leaving or moving are emitted.
One rule for both engines (incremental/engine.py); on the driver, the ranking is one Arrow sort of the touched
partitions' rows (incremental/ranking.py), and a partition to read again is read there when its input is small.

With the view's state_ttl, a partition's count also holds `_touched` (the clock of the batch that last changed
its rows): a partition untouched for the TTL has its top N retracted and leaves state; a partition without state
is read whole from its input rows before the batch as well, so that one coming back after it expired is exact.
"""

from __future__ import annotations

from typing import TypeVar

from sqlglot import exp

from mvengine.incremental.engine import Engine
from mvengine.incremental.state import TOUCHED
from mvengine.incremental.zset import MTIME, WEIGHT
from mvengine.plan.analysis import is_append_only
from mvengine.plan.nodes import Node, TopN
from mvengine.plan.operators import operator_of
from mvengine.plan.operators.top_n import buffer_size

NODE = TopN  # the plan node type this module maintains (plan/operators/top_n.py)

R = TypeVar("R")
COUNT = "_n"
TIME = "_ct"  # the row's commit time, kept when the order reads PROCTIME()
DELETE = "_delete"


def rule(node: TopN, engine: Engine[R]) -> R:
    nid = engine.node_id(node)
    names = [f.name for f in node.child.fields]
    uses_time = any(c.meta.get("proctime") for e in node.expressions() for c in e.find_all(exp.Column))
    columns = names + ([TIME] if uses_time else [])
    pcols = [f"_p{i}" for i in range(max(1, len(node.partition)))]
    order = [_ordered(o) for o in node.order]

    def with_partition(rel: R) -> R:
        if not node.partition:
            return engine.compute(rel, {"_p0": "0"})
        return engine.keyed(rel, None, {c: _local(p) for c, p in zip(pcols, node.partition)}, None)

    def rows_of(child: R) -> R:
        rel = engine.named(child, node.child, names)
        return engine.compute(rel, {TIME: MTIME}) if uses_time else rel

    def with_returning_partitions(changed: R) -> R:
        """`changed` and, for each partition it touches that has no state (new, or back after the view's
        state_ttl expired it), the input's rows of that partition before the batch, as inserts: such a
        partition is ranked from all its rows, as a recomputation ranks it, not from this batch's alone."""
        keys = engine.select(engine.aggregate(changed, {c: c for c in pcols}, {"_k": ("sum", WEIGHT)}), pcols)
        held = engine.select(engine.read_state(counts_name, keys, pcols, keys), pcols)
        missing = engine.keep(engine.lookup(keys, _on(pcols), held, "anti", null_safe=True))
        if not engine.any_rows(missing):
            return changed
        before = engine.before(node.child, list(node.partition), [(missing, pcols)], null_safe=True)
        if before is None:
            return changed
        prior = engine.lookup(with_partition(rows_of(before)), _on(pcols), missing, "semi", null_safe=True)
        names = [*columns, *pcols, WEIGHT, MTIME]
        return engine.keep(engine.concat([engine.select(r, names) for r in (changed, prior)]))

    def ranked(rel: R) -> R:
        """One row per copy of each row (`_n` of them), with `_rn`, its place in the total order, and `_rank`,
        the value of the node's function."""
        functions = {"_rn": "row_number", "_rank": node.function}
        return engine.rank(engine.copies(rel, COUNT), pcols, order, columns, functions)

    rows_name, counts_name = f"n{nid}_top", f"n{nid}_count"
    changed = engine.keep(with_partition(engine.consolidate(rows_of(engine.child(node.child)), columns)))
    clock = engine.clock()
    ttl = clock is not None and clock.state_ttl is not None
    if ttl:  # (a partition is touched when its rows change: rows that cancel out touch nothing)
        changed = with_returning_partitions(changed)
    touched = engine.keep(engine.aggregate(changed, {c: c for c in pcols}, {"_moved": ("sum", WEIGHT)}))
    template = engine.empty(
        engine.select(engine.compute(changed, {COUNT: "CAST(0 AS BIGINT)"}), [*columns, *pcols, COUNT])
    )
    old = engine.keep(engine.read_state(rows_name, template, pcols, touched))

    # Per touched partition: whether the old prefix was complete, and the new row count.
    sizes = engine.aggregate(old, {c: c for c in pcols}, {"_size": ("sum", COUNT)})
    info = engine.lookup(
        engine.with_state(touched, counts_name, pcols, {COUNT: "BIGINT"}),
        _on(pcols),
        sizes,
        "left",
        null_safe=True,
    )
    info = engine.keep(
        engine.select(
            engine.compute(
                info,
                {
                    "_existed": f"{COUNT} IS NOT NULL",
                    "_complete": f"COALESCE({COUNT}, 0) = COALESCE(_size, 0)",
                    "_count": f"COALESCE({COUNT}, 0) + COALESCE(_moved, 0)",
                },
            ),
            [*pcols, "_existed", "_complete", "_count"],
        )
    )

    # 1. The changes merged into the old prefix: a row is in it when the old prefix was the whole partition,
    #    or it sorts no later than the old prefix's last row.
    both = engine.concat(
        [
            engine.select(
                engine.compute(changed, {COUNT: WEIGHT, "_was": "0"}), [*columns, *pcols, COUNT, "_was"]
            ),
            engine.select(engine.compute(old, {"_was": "1"}), [*columns, *pcols, COUNT, "_was"]),
        ]
    )
    merged = engine.aggregate(
        both, {c: c for c in [*columns, *pcols]}, {COUNT: ("sum", COUNT), "_was": ("max", "_was")}
    )
    merged = engine.rank(merged, pcols, order, columns, {"_pos": "row_number"})
    merged = engine.compute(merged, {"_old_pos": "CASE WHEN _was = 1 THEN _pos END"})
    bounds = engine.aggregate(merged, {c: c for c in pcols}, {"_bound": ("max", "_old_pos")})
    for facts in (bounds, engine.select(info, [*pcols, "_complete"])):
        merged = engine.lookup(merged, _on(pcols), facts, "left", null_safe=True)
    prefix = engine.keep(
        engine.select(
            engine.where(merged, f"(_complete OR _pos <= _bound) AND {COUNT} > 0"), [*columns, *pcols, COUNT]
        )
    )

    # 2. Partitions whose prefix no longer shows the top N for sure: read again from the input.
    refillable = _refillable(node.child)
    if refillable:
        unsure = _unsure(engine, node, ranked(prefix), info, pcols)
        if engine.any_rows(unsure):
            before = engine.before(node.child, [], [])
            if before is None:
                raise RuntimeError(f"TopN n{nid}: a partition to read again in a batch without a before")
            whole = with_partition(
                engine.consolidate(
                    engine.concat(
                        [
                            engine.select(rows_of(before), [*columns, WEIGHT, MTIME]),
                            engine.select(changed, [*columns, WEIGHT, MTIME]),
                        ]
                    ),
                    columns,
                )
            )
            whole = engine.lookup(whole, _on(pcols), unsure, "semi", null_safe=True)
            kept = engine.lookup(prefix, _on(pcols), unsure, "anti", null_safe=True)
            refilled = engine.compute(engine.where(whole, f"{WEIGHT} > 0"), {COUNT: WEIGHT})
            prefix = engine.keep(engine.concat([kept, engine.select(refilled, [*columns, *pcols, COUNT])]))

    # 3. The first N + buffer rows of each partition, ties at rank N whole.
    copies = engine.keep(ranked(prefix))
    if refillable:
        keep = node.limit + buffer_size(node, is_append_only(node.child))
        trimmed = engine.where(copies, f"_rn <= {keep} OR _rank <= {node.limit}")
    else:
        trimmed = copies
    new_state = engine.aggregate(trimmed, {c: c for c in [*columns, *pcols]}, {COUNT: ("count", "_rn")})
    gone = engine.lookup(old, _on(columns), new_state, "anti", null_safe=True)
    # ...and the partitions the view's state_ttl expires: untouched for that long, their top N leave the view.
    expired = engine.expired(counts_name, pcols, touched) if ttl else None
    leaving = None if expired is None else engine.keep(engine.read_state(rows_name, template, pcols, expired))
    engine.stage(
        rows_name,
        engine.concat(
            [
                engine.compute(new_state, {DELETE: "false"}),
                *[
                    engine.select(
                        engine.compute(r, {COUNT: "CAST(0 AS BIGINT)", DELETE: "true"}),
                        [*columns, *pcols, COUNT, DELETE],
                    )
                    for r in (gone, leaving)
                    if r is not None
                ],
            ]
        ),
        columns,
        [*pcols, COUNT],
        DELETE,
    )
    counted = engine.compute(
        engine.where(info, "_count <> 0 OR _existed"), {COUNT: "_count", DELETE: "_count = 0"}
    )
    count_columns = [COUNT]
    if ttl:  # (the time a partition was last touched tells when it expires)
        assert clock is not None
        count_columns = [COUNT, TOUCHED]
        counted = engine.compute(counted, {TOUCHED: f"CAST({clock.now} AS BIGINT)"})
        if expired is not None:
            counted = engine.concat(
                [
                    engine.select(r, [*pcols, *count_columns, DELETE])
                    for r in (counted, engine.compute(expired, {DELETE: "true"}))
                ]
            )
    engine.stage(counts_name, counted, pcols, count_columns, DELETE)

    # 4. The old top N out, the new one in; rows that stay cancel out. An expired partition's top N out.
    outputs = names + (["_rank"] if node.ranked else [])
    tops = [
        engine.compute(engine.where(rows, f"_rank <= {node.limit}"), {WEIGHT: f"CAST({sign}1 AS BIGINT)"})
        for rows, sign in ((copies, ""), (ranked(old), "-"))
    ]
    emitted = engine.stamped(
        engine.concat([engine.select(t, [*outputs, WEIGHT]) for t in tops]),
        changed,
    )
    if leaving is not None:
        assert clock is not None
        out = {WEIGHT: "CAST(-1 AS BIGINT)", MTIME: f"timestamp_micros({clock.now})"}
        left = engine.compute(engine.where(ranked(leaving), f"_rank <= {node.limit}"), out)
        emitted = engine.concat([engine.select(r, [*outputs, WEIGHT, MTIME]) for r in (emitted, left)])
    return engine.output(engine.consolidate(emitted, outputs), outputs)


def _on(names: list[str]) -> list[tuple[str, str]]:
    return [(n, n) for n in names]


def _ordered(o: exp.Ordered) -> exp.Ordered:
    local = _local(o)
    assert isinstance(local, exp.Ordered)  # (a copy of an ORDER BY term)
    return local


def _local(e: exp.Expression) -> exp.Expression:
    """`e` over the rule's unqualified columns (PROCTIME() is the kept commit time)."""

    def strip(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.Column) and n.meta.get("proctime"):
            return exp.column(TIME, quoted=True)
        if isinstance(n, exp.Column):
            return exp.column(n.name, quoted=True)
        return n

    return e.copy().transform(strip)


def _unsure(engine: Engine[R], node: TopN, copies: R, info: R, pcols: list[str]) -> R:
    """The touched partitions, with rows, whose prefix may not hold all of their top N."""
    stats = engine.aggregate(
        copies, {c: c for c in pcols}, {"_size": ("count", "_rn"), "_top": ("max", "_rank")}
    )
    joined = engine.lookup(engine.where(info, "_count > 0"), _on(pcols), stats, "left", null_safe=True)
    size = "COALESCE(_size, 0)"
    sure = f"{size} >= {node.limit}" if node.function == "row_number" else f"COALESCE(_top, 0) > {node.limit}"
    return engine.select(engine.where(joined, f"NOT ({size} = _count OR {sure})"), pcols)


def _refillable(child: Node) -> bool:
    """Whether the child's rows at the batch's version can be read again: no operator under it keeps state."""
    for n in child.walk():
        operator = operator_of(n)
        if operator is None or operator.state(n, is_append_only, False) is not None:
            return False
    return True
