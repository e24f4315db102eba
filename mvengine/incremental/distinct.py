"""SELECT DISTINCT: each distinct row's multiplicity in state (`n<i>_rows`); a row enters the output when its
count rises from zero and leaves it when its count falls back to zero."""

from __future__ import annotations

from typing import TypeVar

from mvengine.incremental.engine import Engine
from mvengine.incremental.zset import WEIGHT
from mvengine.plan.nodes import Distinct

NODE = Distinct  # the plan node type this module maintains (plan/operators/distinct.py)

R = TypeVar("R")
COUNT = "_n"  # the row's multiplicity, in state and after the batch
BEFORE = "_before"  # ...and before it
DELETE = "_delete"


def rule(node: Distinct, engine: Engine[R]) -> R:
    columns = [f.name for f in node.fields]
    changed = engine.keep(
        engine.consolidate(engine.named(engine.child(node.child), node.child, columns), columns)
    )
    table = f"n{engine.node_id(node)}_rows"
    found = engine.with_state(changed, table, columns, {COUNT: "BIGINT"})
    merged = engine.keep(
        engine.compute(found, {BEFORE: f"COALESCE({COUNT}, 0)", COUNT: f"COALESCE({COUNT}, 0) + {WEIGHT}"})
    )
    kept = engine.where(
        merged, f"{COUNT} > 0 OR {BEFORE} > 0"
    )  # a row gone before and after: nothing to write
    engine.stage(table, engine.compute(kept, {DELETE: f"{COUNT} <= 0"}), columns, [COUNT], DELETE)
    weight = (
        f"CAST(CASE WHEN {BEFORE} <= 0 AND {COUNT} > 0 THEN 1 WHEN {BEFORE} > 0 AND {COUNT} <= 0 THEN -1 "
        "ELSE 0 END AS BIGINT)"
    )
    return engine.output(engine.where(engine.compute(merged, {WEIGHT: weight}), f"{WEIGHT} <> 0"), columns)
