"""Equi-joins (inner, left, right and full outer, semi, anti) as delta rules over Z-sets.

The inner join is bilinear: Δ(L⋈R) = ΔL⋈R₀ + L₀⋈ΔR + ΔL⋈ΔR, where L₀ and R₀ are the sides as they were before
the batch, evaluated over the inputs read by time travel at the versions the batch starts from. The join keeps
no state of its own: its inputs are Delta tables whose every version stays readable, and a side whose inputs did
not change in the batch contributes no term (a fact table's new rows are joined to the dimension, and the fact
table is not read at all).

A semi join L⋉R keeps the rows of L whose key matches a row of R. Its change is the rows of ΔL whose key matches
in R₁ = R₀+ΔR, plus the rows of L₀ whose key found its first match in the batch, minus those whose key lost its
last one; the anti join's change is ΔL minus that. An outer join is the inner join plus the NULL-padded anti join
of each preserved side: a first match retracts the padded row, deleting the last match brings it back.

NULL keys never match. A condition of ON that reads one side only makes that side's key NULL where it is not
true (the row matches nothing, as SQL has it); one that reads both sides filters the pairs of an inner join
(other kinds with such a condition are planned full, see plan.analysis).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import reduce

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from sqlglot import exp

from mvengine.incremental.batch import Batch, ChildDelta
from mvengine.incremental.driver import (
    DriverBatch,
    DriverChildDelta,
    KeyFilter,
    concat,
    data,
    group_by,
    latest,
    match,
    normalized,
    zset,
)
from mvengine.incremental.driver_expressions import cast, comparison_type, evaluate, predicate_mask
from mvengine.incremental.zset import MTIME, WEIGHT
from mvengine.plan.nodes import Field, Filter, Join, Node, Project, Scan

NODE = Join  # the plan node type this module maintains (plan/operators/join.py)


@dataclass(frozen=True)
class _Side:
    """One side of the join: how its Z-sets are framed for matching (key columns `_<tag>k<i>`, weight
    `_<tag>w`, time `_<tag>t`, next to the side's own columns, which keep their qualifiers)."""

    node: Node
    tag: str  # "l" or "r"
    keys: tuple[exp.Expression, ...]
    condition: exp.Expression | None  # the ON conditions over this side only

    def key(self, i: int) -> str:
        return f"_{self.tag}k{i}"

    @property
    def weight(self) -> str:
        return f"_{self.tag}w"

    @property
    def time(self) -> str:
        return f"_{self.tag}t"

    def frame(self, zset: DataFrame) -> DataFrame:
        keys = {}
        for i, k in enumerate(self.keys):
            value = F.expr(k.sql("spark"))
            if self.condition is not None:
                value = F.when(F.expr(self.condition.sql("spark")), value)
            keys[self.key(i)] = value
        return zset.withColumnsRenamed({WEIGHT: self.weight, MTIME: self.time}).withColumns(keys)

    def helpers(self) -> list[str]:
        return [self.weight, self.time, *[self.key(i) for i in range(len(self.keys))]]

    def matches(self, other: _Side | str) -> Column:
        """Equal keys (never true for a NULL key), against the other side or a table of keys `_<tag>k<i>`."""
        tag = other.tag if isinstance(other, _Side) else other
        return reduce(
            lambda a, b: a & b, [F.col(self.key(i)) == F.col(f"_{tag}k{i}") for i in range(len(self.keys))]
        )

    def unframe(self, df: DataFrame) -> DataFrame:
        """The side's rows again, with their weight and time (from a frame with only this side's helpers)."""
        return df.withColumns({WEIGHT: F.col(self.weight), MTIME: F.col(self.time)}).drop(*self.helpers())


def delta(node: Join, batch: Batch, child_delta: ChildDelta) -> DataFrame:
    left, right, both = _sides(node)
    before = batch.as_before()
    changed = {left.tag: batch.changed(node.left), right.tag: batch.changed(node.right)}
    deltas = {s.tag: s.frame(child_delta(s.node, batch)) for s in (left, right)}
    olds: dict[str, DataFrame | None] = {}

    def old(side: _Side) -> DataFrame | None:
        """The side before the batch (None when the view starts from nothing), read once it is needed."""
        if side.tag not in olds:
            olds[side.tag] = None if before is None else side.frame(child_delta(side.node, before))
        return olds[side.tag]

    terms: list[DataFrame] = []
    if node.kind in ("inner", "left", "right", "full"):
        if changed["l"] and (old_right := old(right)) is not None:
            terms.append(_pairs(left, right, deltas["l"], old_right, both))
        if changed["r"] and (old_left := old(left)) is not None:
            terms.append(_pairs(left, right, old_left, deltas["r"], both))
        if changed["l"] and changed["r"]:
            terms.append(_pairs(left, right, deltas["l"], deltas["r"], both))
    for probe, other in _unmatched_sides(node.kind, left, right):
        semi, anti = _semi_anti(probe, other, deltas, old, changed)
        if node.kind == "semi":
            terms.extend(probe.unframe(t) for t in semi)
        elif node.kind == "anti":
            terms.extend(probe.unframe(t) for t in anti)
        else:
            terms.extend(_padded(probe, other, t, deltas[other.tag]) for t in anti)
    if not terms:  # nothing under this join changed (the batch's changes are elsewhere in the view)
        shape = (
            left.unframe(deltas["l"])
            if node.kind in ("semi", "anti")
            else _pairs(left, right, deltas["l"], deltas["r"], both)
        )
        terms.append(shape.limit(0))
    result = reduce(DataFrame.unionAll, terms)
    if all(f.qualifier is None for f in node.fields):  # the view's root: its columns as the view names them
        result = result.toDF(*[f.name for f in node.fields], WEIGHT, MTIME)
    return result


def _sides(node: Join) -> tuple[_Side, _Side, exp.Expression | None]:
    """The two sides with their keys and one-side conditions, and the condition reading both sides."""
    left_only, right_only, both = node.conditions()
    left = _Side(node.left, "l", tuple(pair[0] for pair in node.equi), _and(left_only))
    right = _Side(node.right, "r", tuple(pair[1] for pair in node.equi), _and(right_only))
    return left, right, _and(both)


def _unmatched_sides(kind: str, left: _Side, right: _Side) -> list[tuple[_Side, _Side]]:
    """(probe, other) for each side whose rows are kept by whether they match: semi and anti joins keep or drop
    the left rows, outer joins pad the unmatched rows of the sides they preserve."""
    return {
        "semi": [(left, right)],
        "anti": [(left, right)],
        "left": [(left, right)],
        "right": [(right, left)],
        "full": [(left, right), (right, left)],
    }.get(kind, [])


def _pairs(
    left: _Side, right: _Side, left_rows: DataFrame, right_rows: DataFrame, both: exp.Expression | None
) -> DataFrame:
    """The matching pairs of two framed Z-sets: weights multiply, the time is the later one."""
    pairs = left_rows.join(right_rows, left.matches(right), "inner")
    if both is not None:
        pairs = pairs.where(F.expr(both.sql("spark")))
    pairs = pairs.withColumns(
        {
            WEIGHT: F.col(left.weight) * F.col(right.weight),
            MTIME: F.greatest(F.col(left.time), F.col(right.time)),
        }
    )
    return pairs.drop(*left.helpers(), *right.helpers())


def _counts(side: _Side, zset: DataFrame, tag: str) -> DataFrame:
    """Per key (without NULLs, which match nothing): the side's net number of rows `_<tag>n`, keys `_<tag>k<i>`,
    latest change `_<tag>t`."""
    keys = range(len(side.keys))
    matchable = reduce(lambda a, b: a & b, [F.col(side.key(i)).isNotNull() for i in keys])
    return (
        zset.where(matchable)
        .groupBy(*[F.col(side.key(i)).alias(f"_{tag}k{i}") for i in keys])
        .agg(F.sum(side.weight).alias(f"_{tag}n"), F.max(side.time).alias(f"_{tag}t"))
    )


def _semi_anti(
    probe: _Side,
    other: _Side,
    deltas: dict[str, DataFrame],
    old: Callable[[_Side], DataFrame | None],
    changed: dict[str, bool],
) -> tuple[list[DataFrame], list[DataFrame]]:
    """The changes of the probe side's matched (semi) and unmatched (anti) rows, as framed probe rows."""
    keys = range(len(probe.keys))
    other_old = old(other)
    before = _counts(other, other_old, "b") if other_old is not None else None  # keys _bk<i>, count _bn
    moved = _counts(other, deltas[other.tag], "d") if changed[other.tag] else None  # keys _dk<i>, count _dn
    # The keys that match after the batch.
    parts = [c.toDF(*[f"_ak{i}" for i in keys], "_an", "_at") for c in (before, moved) if c is not None]
    after = (
        reduce(DataFrame.unionAll, parts)
        .groupBy(*[f"_ak{i}" for i in keys])
        .agg(F.sum("_an").alias("_an"))
        .where(F.col("_an") > 0)
    )
    semi: list[DataFrame] = []
    anti: list[DataFrame] = []
    if changed[probe.tag]:
        semi.append(deltas[probe.tag].join(after, probe.matches("a"), "left_semi"))
        anti.append(deltas[probe.tag].join(after, probe.matches("a"), "left_anti"))
    probe_old = old(probe) if moved is not None else None  # (read only when keys can flip)
    if moved is not None and probe_old is not None:
        # Keys whose first match arrived (+1) or whose last match went (-1) in the batch.
        if before is not None:
            joined = moved.join(
                before,
                reduce(lambda a, b: a & b, [F.col(f"_dk{i}") == F.col(f"_bk{i}") for i in keys]),
                "left",
            )
            had = F.coalesce(F.col("_bn"), F.lit(0))
        else:
            joined, had = moved, F.lit(0)
        has = had + F.col("_dn")
        flip = F.when((had <= 0) & (has > 0), F.lit(1)).when((had > 0) & (has <= 0), F.lit(-1))
        flips = joined.select(
            *[f"_dk{i}" for i in keys], flip.cast("long").alias("_flip"), F.col("_dt").alias("_ft")
        ).where(F.col("_flip").isNotNull())
        flipped = probe_old.join(flips, probe.matches("d"), "inner")
        helpers = [*[f"_dk{i}" for i in keys], "_flip", "_ft"]
        semi.append(
            flipped.withColumns(
                {probe.weight: F.col(probe.weight) * F.col("_flip"), probe.time: F.col("_ft")}
            ).drop(*helpers)
        )
        anti.append(
            flipped.withColumns(
                {probe.weight: -F.col(probe.weight) * F.col("_flip"), probe.time: F.col("_ft")}
            ).drop(*helpers)
        )
    return semi, anti


def _padded(probe: _Side, other: _Side, rows: DataFrame, other_shape: DataFrame) -> DataFrame:
    """Framed probe rows with NULLs for the other side's columns (taken, with their qualifiers, from a frame of
    the other side that is never read), in the join's column order."""
    nothing = other_shape.where(F.lit(False))
    if probe.tag == "l":
        padded = rows.join(nothing, F.lit(False), "left_outer")
    else:
        padded = nothing.join(rows, F.lit(False), "right_outer")
    return padded.withColumns({WEIGHT: F.col(probe.weight), MTIME: F.col(probe.time)}).drop(
        *probe.helpers(), *other.helpers()
    )


def _and(parts: list[exp.Expression]) -> exp.Expression | None:
    if not parts:
        return None
    both = exp.and_(*parts, copy=False)
    assert isinstance(both, exp.Expression)
    return both


# -- on the driver ---------------------------------------------------------------------------------------------
# The same terms over Arrow tables. Each side before the batch is read only for the keys that the batch's
# changes carry (on both sides: the inner terms need the other side's, the match counts of semi, anti and outer
# joins need both), pushed down to the input the key column comes from.


@dataclass
class _Framed:
    """A side's Z-set on the driver with its key values (NULL where a one-side condition is not true)."""

    rows: pa.Table
    keys: list[pa.ChunkedArray]


def driver_delta(node: Join, batch: DriverBatch, child_delta: DriverChildDelta) -> pa.Table:
    left, right, both = _sides(node)
    changed = {"l": batch.changed(node.left), "r": batch.changed(node.right)}
    deltas = {s.tag: _frame_on_driver(s, child_delta(s.node, batch)) for s in (left, right)}
    _align_key_types(deltas["l"], deltas["r"])
    olds: dict[str, _Framed | None] = {}

    def old(side: _Side) -> _Framed | None:
        if side.tag not in olds:
            before = batch.as_before(_key_filters(side, [deltas["l"], deltas["r"]]))
            olds[side.tag] = (
                None if before is None else _frame_on_driver(side, child_delta(side.node, before))
            )
            framed = olds[side.tag]
            if framed is not None:
                _align_key_types(framed, deltas[side.tag])
        return olds[side.tag]

    inputs = (*node.left.fields, *node.right.fields)
    terms: list[pa.Table] = []
    if node.kind in ("inner", "left", "right", "full"):
        if changed["l"] and (old_right := old(right)) is not None:
            terms.append(_pairs_on_driver(deltas["l"], old_right, both, inputs))
        if changed["r"] and (old_left := old(left)) is not None:
            terms.append(_pairs_on_driver(old_left, deltas["r"], both, inputs))
        if changed["l"] and changed["r"]:
            terms.append(_pairs_on_driver(deltas["l"], deltas["r"], both, inputs))
    for probe, other in _unmatched_sides(node.kind, left, right):
        semi, anti = _semi_anti_on_driver(probe, other, deltas, old, changed)
        if node.kind == "semi":
            terms.extend(semi)
        elif node.kind == "anti":
            terms.extend(anti)
        else:
            terms.extend(_padded_on_driver(probe, t, deltas[other.tag].rows) for t in anti)
    if not terms:
        shape = (
            deltas["l"].rows
            if node.kind in ("semi", "anti")
            else _pairs_on_driver(deltas["l"], deltas["r"], None, inputs)
        )
        terms.append(shape.schema.empty_table())
    return concat(terms)


def _frame_on_driver(side: _Side, changes: pa.Table) -> _Framed:
    keys = []
    condition = None if side.condition is None else predicate_mask(side.condition, changes, side.node.fields)
    for k in side.keys:
        value = evaluate(k, changes, side.node.fields)
        if condition is not None:
            value = pc.if_else(condition, value, pa.scalar(None, value.type))
        keys.append(value)
    return _Framed(changes, keys)


def _align_key_types(a: _Framed, b: _Framed) -> None:
    """Both sides' keys in the type Spark compares them in (an INT key joins a BIGINT key as BIGINT)."""
    for i, (x, y) in enumerate(zip(a.keys, b.keys)):
        if x.type != y.type:
            target = comparison_type(x.type, y.type)
            a.keys[i], b.keys[i] = cast(x, target), cast(y, target)


def _key_filters(side: _Side, deltas: list[_Framed]) -> dict[str, KeyFilter]:
    """The input rows of `side` that the batch's keys can reach: the first key that is a column of an input,
    passed through unchanged, narrows that input to the keys the changes of both sides carry, and so do the
    columns an equality of a join below ties to it (a fact table joined to the dimension the key is of is read
    for the facts of those keys, not whole); an input the side scans twice is not narrowed."""
    for i, key in enumerate(side.keys):
        found = _input_columns(side.node, key)
        if not found:
            continue
        values = pc.unique(
            pa.chunked_array(
                [v for d in deltas for v in d.keys[i].chunks], deltas[0].keys[i].type
            ).drop_null()
        )
        # An input scanned twice (a self-join) is read once for both scans: a filter by one scan's column could
        # drop rows the other needs, so it is read whole.
        scans = Counter(n.input for n in side.node.walk() if isinstance(n, Scan))
        return {name: (column, values) for name, column in found if scans[name] == 1}
    return {}


def _input_columns(node: Node, key: exp.Expression) -> list[tuple[str, str]]:
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
                    tied.extend(_input_columns(other, partner))
            node = side
        else:
            return []
    return []


def _position(fields: Sequence[Field], column: exp.Column) -> int | None:
    return next(
        (i for i, f in enumerate(fields) if f.name == column.name and f.qualifier == (column.table or None)),
        None,
    )


def _pairs_on_driver(
    lf: _Framed, rf: _Framed, both: exp.Expression | None, inputs: tuple[Field, ...]
) -> pa.Table:
    li, ri = match(lf.keys, rf.keys, "inner")
    left, right = lf.rows.take(li), rf.rows.take(ri)
    weight = pc.multiply_checked(left.column(WEIGHT), right.column(WEIGHT))
    mtime = latest(left.column(MTIME), right.column(MTIME))
    result = zset([*data(left), *data(right)], weight, mtime)
    if both is not None:
        result = result.filter(predicate_mask(both, result, inputs))
    return result


def _counts_on_driver(framed: _Framed) -> pa.Table:
    """Per key (NULL keys match nothing): the side's net rows `_n` and latest change `_t`; keys `k<i>`."""
    names = [f"k{i}" for i in range(len(framed.keys))]
    table = pa.table(
        [*[normalized(k) for k in framed.keys], framed.rows.column(WEIGHT), framed.rows.column(MTIME)],
        names=[*names, WEIGHT, MTIME],
    )
    matchable = None
    for k in names:
        valid = pc.is_valid(table.column(k))
        matchable = valid if matchable is None else pc.and_(matchable, valid)
    if matchable is not None:
        table = table.filter(matchable)
    grouped = group_by(table, names).aggregate([(WEIGHT, "sum"), (MTIME, "max")])
    return pa.table(
        [
            *[grouped.column(k) for k in names],
            grouped.column(f"{WEIGHT}_sum"),
            grouped.column(f"{MTIME}_max"),
        ],
        names=[*names, "_n", "_t"],
    )


def _semi_anti_on_driver(
    probe: _Side,
    other: _Side,
    deltas: dict[str, _Framed],
    old: Callable[[_Side], _Framed | None],
    changed: dict[str, bool],
) -> tuple[list[pa.Table], list[pa.Table]]:
    """The changes of the probe side's matched (semi) and unmatched (anti) rows, as Z-sets of the probe's
    columns (the math of _semi_anti)."""
    keys = range(len(probe.keys))
    other_old = old(other)
    before = _counts_on_driver(other_old) if other_old is not None else None
    moved = _counts_on_driver(deltas[other.tag]) if changed[other.tag] else None
    parts = [c for c in (before, moved) if c is not None]
    counted = group_by(pa.concat_tables(parts), [f"k{i}" for i in keys]).aggregate([("_n", "sum")])
    after = counted.filter(pc.greater(counted.column("_n_sum"), 0))
    after_keys = [after.column(f"k{i}") for i in keys]
    semi: list[pa.Table] = []
    anti: list[pa.Table] = []
    if changed[probe.tag]:
        rows = deltas[probe.tag]
        semi.append(rows.rows.take(match(rows.keys, after_keys, "left semi")[0]))
        anti.append(rows.rows.take(match(rows.keys, after_keys, "left anti")[0]))
    probe_old = old(probe) if moved is not None else None  # (read only when keys can flip)
    if moved is not None and probe_old is not None:
        moved_keys = [moved.column(f"k{i}") for i in keys]
        if before is not None:
            mi, bi = match(moved_keys, [before.column(f"k{i}") for i in keys], "left outer")
            had = pc.fill_null(before.column("_n").take(bi), 0)
            moved = moved.take(mi)
        else:
            had = pa.repeat(pa.scalar(0, pa.int64()), moved.num_rows)
        has = pc.add(had, moved.column("_n"))
        flip = pc.case_when(
            pc.make_struct(
                pc.and_(pc.less_equal(had, 0), pc.greater(has, 0)),
                pc.and_(pc.greater(had, 0), pc.less_equal(has, 0)),
                field_names=["up", "down"],
            ),
            pa.scalar(1, pa.int64()),
            pa.scalar(-1, pa.int64()),
        )
        flips = moved.append_column("_flip", flip)
        flips = flips.filter(pc.is_valid(flips.column("_flip")))
        oi, fi = match(probe_old.keys, [flips.column(f"k{i}") for i in keys], "inner")
        flipped = probe_old.rows.take(oi)
        flip_of = flips.column("_flip").take(fi)
        at = flips.column("_t").take(fi)
        flipped_rows = data(flipped)
        semi.append(zset(flipped_rows, pc.multiply(flipped.column(WEIGHT), flip_of), at))
        anti.append(zset(flipped_rows, pc.multiply(flipped.column(WEIGHT), pc.negate(flip_of)), at))
    return semi, anti


def _padded_on_driver(probe: _Side, rows: pa.Table, other_shape: pa.Table) -> pa.Table:
    """Probe rows with NULLs for the other side's columns, in the join's column order."""
    nulls = [pa.nulls(rows.num_rows, f.type) for f in other_shape.schema][:-2]
    columns = [*data(rows), *nulls] if probe.tag == "l" else [*nulls, *data(rows)]
    return zset(columns, rows.column(WEIGHT), rows.column(MTIME))
