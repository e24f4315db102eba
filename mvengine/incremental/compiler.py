"""Walks a view's plan and applies each operator's delta rule: the view's output changes for one batch."""

from __future__ import annotations

from pyspark.sql import DataFrame

from mvengine.incremental import aggregate, distinct, filter, join, project, scan, union
from mvengine.incremental.batch import Batch
from mvengine.plan.nodes import Aggregate, Distinct, Filter, Join, Node, Project, Scan, UnionAll

RULES = {Scan: scan.delta, Filter: filter.delta, Project: project.delta, Aggregate: aggregate.delta,
         Distinct: distinct.delta, UnionAll: union.delta, Join: join.delta}


def supports(root: Node) -> bool:
    """Whether every operator of the plan has a delta rule."""
    return all(type(node) in RULES for node in root.walk())


def view_delta(root: Node, batch: Batch) -> DataFrame:
    """The Z-set of the view's rows (its columns, _w, _mtime) that this batch's input changes cause."""
    batch.node_ids = {id(node): i for i, node in enumerate(root.walk())}
    return node_delta(root, batch)


def node_delta(node: Node, batch: Batch) -> DataFrame:
    """A node's output changes, named by its fields and aliased by their qualifier (for the parent's SQL)."""
    df = RULES[type(node)](node, batch, node_delta)
    qualifiers = {f.qualifier for f in node.fields}
    if len(qualifiers) == 1 and None not in qualifiers:
        df = df.alias(qualifiers.pop())
    return df
