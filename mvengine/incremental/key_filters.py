"""Which rows of its inputs a join's side is read for on the driver, before a batch: those the batch's keys can
reach. A key that is an input's column passed through unchanged narrows that input to the keys' values, and so
do the columns the equalities of the joins below tie to it (a fact table joined to the dimension the key is of
is read for the facts of those keys, not whole)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from mvengine.incremental.driver import KeyFilter
from mvengine.plan.nodes import Field, Filter, Join, Node, Project, Scan, WindowAssign
from mvengine.storage.api import Bounds


def key_filters(
    node: Node,
    keys: Sequence[exp.Expression],
    values: Sequence[pa.ChunkedArray],
    null_safe: bool = False,
) -> dict[str, KeyFilter]:
    """The input rows of `node` whose `keys` (bound over its fields) can take `values` (the i-th key's values
    in the batch; a NULL among them names the rows whose key is NULL only when `null_safe`: a group's, not a
    join's): the first key that narrows an input narrows it and the inputs tied to it; an input the node
    scans twice is read whole (a self-join reads it once for both scans, and a filter by one scan's column
    could drop rows the other needs)."""
    for key, found_values in zip(keys, values):
        found = input_columns(node, key)
        if not found:
            continue
        unique = pc.unique(found_values if null_safe else found_values.drop_null())
        return {name: (column, unique) for name, column in _scanned_once(node, found)}
    return {}


def range_filters(node: Node, column: exp.Expression, low: int, high: int) -> dict[str, Bounds]:
    """The input rows of `node` whose TIMESTAMP `column` (bound over its fields) can lie in `low..high`
    (microseconds since the epoch), by the input columns it comes from, as `key_filters` finds them; a window's
    start or end by the time its rows hold (a window starting at s holds the times from s to s + size)."""
    found, (low_at, high_at) = input_columns(node, column), (low, high)
    if not found and (window := _window_time(node, column)) is not None:
        below, time, before, after = window
        found, low_at, high_at = input_columns(below, time), low + before, high + after
    times = [pa.scalar(t, pa.timestamp("us", tz="UTC")) for t in (low_at, high_at)]
    return {name: (input_column, *times) for name, input_column in _scanned_once(node, found)}


def _window_time(node: Node, column: exp.Expression) -> tuple[Node, exp.Column, int, int] | None:
    """For a window bound passed through unchanged from a (tumbling or hopping) WindowAssign: the window's input,
    its time column, and how far before and after the bound's values its rows' times lie."""
    position = _position(node.fields, column) if isinstance(column, exp.Column) else None
    while position is not None:
        if isinstance(node, Filter):
            node = node.child
        elif isinstance(node, Project) and isinstance(projected := node.projections[position], exp.Column):
            node = node.child
            position = _position(node.fields, projected)
        elif (
            isinstance(node, WindowAssign)
            and node.spec.kind != "session"
            and position >= len(node.child.fields)
        ):
            size, bound = node.spec.size, node.fields[position].window_bound
            spans = {"start": (0, size - 1), "end": (-size, -1)}  # start ≤ time < start + size = end
            return (node.child, node.time, *spans[bound]) if bound in spans else None
        else:
            return None
    return None


def _scanned_once(node: Node, found: list[tuple[str, str]]) -> list[tuple[str, str]]:
    scans = Counter(n.input for n in node.walk() if isinstance(n, Scan))
    return [(name, column) for name, column in found if scans[name] == 1]


def input_columns(node: Node, key: exp.Expression) -> list[tuple[str, str]]:
    """(input, column) pairs whose rows hold the key's value in every row of `node` that has one (a NULL key
    matches nothing): the input column `key` comes from unchanged, and the columns the equalities of the joins
    on its way tie to it; none when `key` is not a column passed through unchanged."""
    if not isinstance(key, exp.Column):
        return []
    position = _position(node.fields, key)
    tied: list[tuple[str, str]] = []
    while position is not None:
        if isinstance(node, Scan):
            return [(node.input, node.fields[position].name), *tied]
        if isinstance(node, Filter):
            node = node.child
        elif isinstance(node, Project):
            projected = node.projections[position]
            if not isinstance(projected, exp.Column):
                return []
            child = node.child
            node, position = child, _position(child.fields, projected)
        elif isinstance(node, Join) and node.kind not in ("semi", "anti"):
            split = len(node.left.fields)
            on_left = position < split
            side, other = (node.left, node.right) if on_left else (node.right, node.left)
            position = position if on_left else position - split
            field = side.fields[position]
            for pair in node.equi:
                mine, partner = pair if on_left else pair[::-1]
                if isinstance(mine, exp.Column) and (mine.name, mine.table or None) == (
                    field.name,
                    field.qualifier,
                ):
                    tied.extend(input_columns(other, partner))
            node = side
        else:
            return []
    return []


def _position(fields: Sequence[Field], column: exp.Column) -> int | None:
    return next(
        (i for i, f in enumerate(fields) if f.name == column.name and f.qualifier == (column.table or None)),
        None,
    )
