"""Walks a view's plan and applies each operator's delta rule: the view's output changes for one batch, as a
Spark DataFrame (`view_delta`) or, for a small batch, an Arrow table computed on the driver
(`view_delta_on_driver`, see incremental/driver.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame

from mvengine.incremental import (
    aggregate,
    distinct,
    filter,
    join,
    lookup_join,
    over,
    project,
    scan,
    session_window,
    temporal_join,
    top_n,
    union,
    window_assign,
)
from mvengine.incremental.batch import Batch
from mvengine.incremental.driver import DriverBatch
from mvengine.incremental.engine import ArrowEngine
from mvengine.incremental.hand_off import rule_engine
from mvengine.plan.nodes import Filter, Node
from mvengine.plan.operators import operators

# The modules of the delta rules, each naming the plan node type it maintains (NODE); the operator of that type
# (plan/operators) says whether the driver runs it too.
RULE_MODULES = (
    scan,
    filter,
    project,
    union,
    distinct,
    aggregate,
    join,
    temporal_join,
    lookup_join,
    window_assign,
    session_window,
    top_n,
    over,
)


def _rules(name: str) -> dict[type[Node], Callable[..., Any]]:
    """Each node type's rule in the form `name` (delta: Spark, driver_delta: Arrow): its module's `rule`, written
    once against the engine interface (incremental/engine.py) and run by that form's engine, or (an operator
    not yet written so) its module's function of that name."""
    found = {}
    for module in RULE_MODULES:
        operator = operators()[module.NODE]
        if name == "delta" or operator.on_driver:
            one = getattr(module, "rule", None)
            found[module.NODE] = getattr(module, name) if one is None else _run_by(name, one)
    return found


def _run_by(name: str, rule: Callable[..., Any]) -> Callable[..., Any]:
    """A rule written once, run by the engine of the form `name`."""
    if name == "delta":  # (Spark's engine, or one that hands the rest of the batch to the driver)
        return lambda node, batch, child_delta: rule(node, rule_engine(node, batch, child_delta))
    return lambda node, batch, child_delta: rule(node, ArrowEngine(batch, child_delta))


RULES = _rules("delta")
DRIVER_RULES = _rules("driver_delta")


def view_delta(
    root: Node, batch: Batch, *, unfiltered: Callable[[DataFrame], None] | None = None
) -> DataFrame | pa.Table:
    """The Z-set of the view's rows (its columns, _w, _mtime) that this batch's input changes cause: in Arrow,
    named as `view_delta_on_driver` names it, when the batch was handed to the driver (incremental/hand_off.py).

    `unfiltered`, for a view whose own expectations drop rows (its root is the Filter that drops them), is
    given the changes before that filter: what the expectations are checked on."""
    batch.node_ids = {id(node): i for i, node in enumerate(root.walk())}
    if batch.hand_off is not None:
        batch.hand_off.driver.node_ids = batch.node_ids
    if unfiltered is None:
        changes: DataFrame | pa.Table = node_delta(root, batch)
        return named_on_driver(root, changes) if isinstance(changes, pa.Table) else changes
    assert batch.hand_off is None and isinstance(root, Filter)  # the expectations' filter
    before = node_delta(root.child, batch)
    unfiltered(before)
    rows: DataFrame = RULES[type(root)](root, batch, lambda node, batch: before)
    return rows


def node_delta(node: Node, batch: Batch) -> DataFrame:
    """A node's output changes, named by its fields and aliased by their qualifier (for the parent's SQL); in
    Arrow, by position, when the batch was handed to the driver."""
    df: DataFrame | pa.Table = RULES[type(node)](node, batch, node_delta)
    if isinstance(df, pa.Table):  # (only a rule of hand_off.HandOffEngine takes it, as its child's changes)
        return df  # type: ignore[no-any-return]
    qualifiers = {f.qualifier for f in node.fields}
    qualifier = qualifiers.pop() if len(qualifiers) == 1 else None
    return df.alias(qualifier) if qualifier is not None else df


def view_delta_on_driver(
    root: Node, batch: DriverBatch, *, unfiltered: Callable[[pa.Table], None] | None = None
) -> pa.Table:
    """`view_delta` on the driver: the view's columns by name, `_w`, `_mtime`. Raises NotOnDriver when the batch
    must go to Spark (what the rules staged in the state is then to be dropped)."""
    batch.node_ids = {id(node): i for i, node in enumerate(root.walk())}
    if unfiltered is None:
        return named_on_driver(root, node_delta_on_driver(root, batch))
    assert isinstance(root, Filter)  # the expectations' filter
    before = named_on_driver(root, node_delta_on_driver(root.child, batch))
    unfiltered(before)
    return named_on_driver(root, DRIVER_RULES[type(root)](root, batch, lambda node, batch: before))


def named_on_driver(root: Node, changes: pa.Table) -> pa.Table:
    """The driver's changes of the view's root (by position) named by the view's columns."""
    return changes.rename_columns([f.name for f in root.fields] + changes.column_names[len(root.fields) :])


def node_delta_on_driver(node: Node, batch: DriverBatch) -> pa.Table:
    return DRIVER_RULES[type(node)](node, batch, node_delta_on_driver)
