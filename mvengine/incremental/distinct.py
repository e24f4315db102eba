"""SELECT DISTINCT: each distinct row's multiplicity in state (`n<i>_rows`); a row enters the output when its
count rises from zero and leaves it when its count falls back to zero, or when the view's state_ttl expires it
(with the time it was last touched, `_touched`, in state)."""

from __future__ import annotations

from typing import TypeVar

from mvengine.incremental.engine import Engine
from mvengine.incremental.state import TOUCHED
from mvengine.incremental.zset import MTIME, WEIGHT
from mvengine.plan.nodes import Distinct

NODE = Distinct  # the plan node type this module maintains (plan/operators/distinct.py)

R = TypeVar("R")
COUNT = "_n"  # the row's multiplicity, in state and after the batch
BEFORE = "_before"  # ...and before it
DELETE = "_delete"
PRIOR = "_prior"  # a row's copies among the input's rows before the batch (one without state: state_ttl)


def rule(node: Distinct, engine: Engine[R]) -> R:
    columns = [f.name for f in node.fields]
    changed = engine.keep(
        engine.consolidate(engine.named(engine.child(node.child), node.child, columns), columns)
    )
    table = f"n{engine.node_id(node)}_rows"
    found = engine.with_state(changed, table, columns, {COUNT: "BIGINT"})
    clock = engine.clock()
    ttl = clock is not None and clock.state_ttl is not None
    # A row without state is new, or (with a state_ttl) back after it expired: counted from the input's copies
    # of it before the batch, it enters the view whichever it is.
    held = f"COALESCE({COUNT}, 0)"
    if ttl:
        found, held = _with_prior_counts(engine, node, found, columns), f"COALESCE({COUNT}, {PRIOR}, 0)"
    merged = engine.keep(
        engine.compute(found, {BEFORE: f"COALESCE({COUNT}, 0)", COUNT: f"{held} + {WEIGHT}"})
    )
    kept = engine.where(
        merged, f"{COUNT} > 0 OR {BEFORE} > 0"
    )  # a row gone before and after: nothing to write
    kept = engine.compute(kept, {DELETE: f"{COUNT} <= 0"})
    weight = (
        f"CAST(CASE WHEN {BEFORE} <= 0 AND {COUNT} > 0 THEN 1 WHEN {BEFORE} > 0 AND {COUNT} <= 0 THEN -1 "
        "ELSE 0 END AS BIGINT)"
    )
    changes = engine.output(engine.where(engine.compute(merged, {WEIGHT: weight}), f"{WEIGHT} <> 0"), columns)
    if not ttl:
        engine.stage(table, kept, columns, [COUNT], DELETE)
        return changes
    # The rows the state_ttl expires (untouched for that long) leave the view.
    assert clock is not None
    names = [*columns, COUNT, TOUCHED, DELETE]
    kept = engine.select(engine.compute(kept, {TOUCHED: f"CAST({clock.now} AS BIGINT)"}), names)
    expired = engine.expired(table, columns, changed)
    if expired is not None:
        kept = engine.concat([kept, engine.select(engine.compute(expired, {DELETE: "true"}), names)])
        leaving = {WEIGHT: "CAST(-1 AS BIGINT)", MTIME: f"timestamp_micros({clock.now})"}
        changes = engine.concat([changes, engine.output(engine.compute(expired, leaving), columns)])
    engine.stage(table, kept, columns, [COUNT, TOUCHED], DELETE)
    return changes


def _with_prior_counts(engine: Engine[R], node: Distinct, found: R, columns: list[str]) -> R:
    """`found` (the changed rows with their state count) with `_prior`: for a row without state, its copies
    among the input's rows before the batch (NULL: none)."""
    missing = engine.keep(engine.select(engine.where(found, f"{COUNT} IS NULL"), columns))
    before = None
    if engine.any_rows(missing):
        keys = [f.ref() for f in node.child.fields]
        before = engine.before(node.child, keys, [(missing, columns)], null_safe=True)
    if before is None:
        return engine.compute(found, {PRIOR: "CAST(NULL AS BIGINT)"})
    copies = engine.consolidate(engine.named(before, node.child, columns), columns)
    copies = engine.lookup(copies, [(c, c) for c in columns], missing, "semi", null_safe=True)
    copies = engine.rename(engine.select(copies, [*columns, WEIGHT]), {WEIGHT: PRIOR})
    return engine.lookup(found, [(c, c) for c in columns], copies, "left", null_safe=True)
