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

An inner join whose condition bounds the difference of the two sides' event times (an interval join,
plan/time_bounds.py) reads L₀ only at the times ΔR's rows can meet, and R₀ at those ΔL's can: a batch of a stream
opens the files of the last minutes, whose statistics hold those times, and not the whole stream. Nothing is
dropped as late: a row that arrives late reads the older files it needs.

NULL keys never match. A condition of ON that reads one side only makes that side's key NULL where it is not
true (the row matches nothing, as SQL has it); one that reads both sides filters the pairs, and an outer join
then counts each preserved row's matches row by row (`_unmatched_rows`: keys alone do not decide whether a row
is padded); semi and anti joins with such a condition are planned full (plan.analysis).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from sqlglot import exp

from mvengine.incremental.engine import Engine, Within
from mvengine.incremental.zset import MTIME, WEIGHT
from mvengine.plan.nodes import Join, Node
from mvengine.plan.time_bounds import TimeBound, join_time_bound

NODE = Join  # the plan node type this module maintains (plan/operators/join.py)

R = TypeVar("R")


@dataclass(frozen=True)
class _Side:
    """One side of the join: its keys, named `_<tag>k<i>` next to the side's own columns, and the conditions of
    ON that read this side only."""

    node: Node
    tag: str  # "l" or "r"
    keys: tuple[exp.Expression, ...]
    condition: exp.Expression | None

    @property
    def key_names(self) -> list[str]:
        return [f"_{self.tag}k{i}" for i in range(len(self.keys))]

    def frame(self, engine: Engine[R], changes: R) -> R:
        return engine.keyed(changes, self.node, dict(zip(self.key_names, self.keys)), self.condition)

    def against(self, names: list[str]) -> list[tuple[str, str]]:
        """Key pairs: this side's keys against the named columns of another relation."""
        return list(zip(self.key_names, names))


def rule(node: Join, engine: Engine[R]) -> R:
    left, right, both = _sides(node)
    changed = {s.tag: engine.changed(s.node) for s in (left, right)}
    deltas = {s.tag: s.frame(engine, engine.child(s.node)) for s in (left, right)}
    known = [(deltas[s.tag], s.key_names) for s in (left, right)]
    bound = join_time_bound(node)
    olds: dict[str, R | None] = {}

    def old(side: _Side) -> R | None:
        """The side before the batch (None when the view starts from nothing), read once it is needed, for the
        keys the batch's changes carry on either side (and, in an interval join, the times the other side's
        changes can meet)."""
        if side.tag not in olds:
            within = (
                None
                if bound is None
                else _within(engine, bound, side, right if side is left else left, deltas)
            )
            rows = engine.before(side.node, side.keys, known, within)
            olds[side.tag] = None if rows is None else side.frame(engine, rows)
        return olds[side.tag]

    def meeting(side: _Side, rows: R) -> R | None:
        """`side` before the batch, for the keys (and, in an interval join, the times) that `rows` of the other
        side can meet."""
        other = right if side is left else left
        within = None if bound is None else _within(engine, bound, side, other, {other.tag: rows})
        read = engine.before(side.node, side.keys, [(rows, other.key_names)], within)
        return None if read is None else side.frame(engine, read)

    keys = left.against(right.key_names)
    fields = (*node.left.fields, *node.right.fields)
    terms: list[R] = []
    if node.kind in ("inner", "left", "right", "full"):
        if changed["l"] and (old_right := old(right)) is not None:
            terms.append(engine.pairs(deltas["l"], old_right, keys, both, fields))
        if changed["r"] and (old_left := old(left)) is not None:
            terms.append(engine.pairs(old_left, deltas["r"], keys, both, fields))
        if changed["l"] and changed["r"]:
            terms.append(engine.pairs(deltas["l"], deltas["r"], keys, both, fields))
    for probe, other in _unmatched_sides(node.kind, left, right):
        if both is not None:  # (outer joins only: semi and anti joins with such a condition are planned full)
            sides = (probe, other)
            terms.extend(_unmatched_rows(engine, node, sides, both, deltas, old, meeting, changed))
            continue
        semi, anti = _semi_anti(engine, probe, other, deltas, old, changed)
        if node.kind == "semi":
            terms.extend(engine.drop(t, probe.key_names) for t in semi)
        elif node.kind == "anti":
            terms.extend(engine.drop(t, probe.key_names) for t in anti)
        else:
            other_rows = engine.drop(deltas[other.tag], other.key_names)
            terms.extend(
                engine.padded(engine.drop(t, probe.key_names), other_rows, probe is left) for t in anti
            )
    if not terms:  # nothing under this join changed (the batch's changes are elsewhere in the view)
        shape = (
            engine.drop(deltas["l"], left.key_names)
            if node.kind in ("semi", "anti")
            else engine.pairs(deltas["l"], deltas["r"], keys, both, fields)
        )
        terms.append(engine.empty(shape))
    return engine.joined(engine.concat(terms), node)


def _within(engine: Engine[R], bound: TimeBound, side: _Side, other: _Side, deltas: dict[str, R]) -> Within:
    """The times of `side` that the rows of `other`'s changes can meet, left − right lying in the bound's range
    (an empty range when no change has a time)."""
    mine, theirs = (bound.left, bound.right) if side.tag == "l" else (bound.right, bound.left)
    times = engine.time_range(deltas[other.tag], other.node, theirs)
    if times is None:
        return mine, 1, 0
    assert bound.low is not None and bound.high is not None  # (join_time_bound bounds both ends)
    if side.tag == "l":  # left ∈ right + [low, high]
        return mine, times[0] + bound.low, times[1] + bound.high
    return mine, times[0] - bound.high, times[1] - bound.low  # right ∈ left − [low, high]


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


def _counts(engine: Engine[R], side: _Side, rows: R, tag: str) -> R:
    """Per key (without NULLs, which match nothing): the side's net number of rows `_<tag>n`, keys `_<tag>k<i>`,
    latest change `_<tag>t`."""
    matchable = " AND ".join(f"{k} IS NOT NULL" for k in side.key_names)
    return engine.aggregate(
        engine.where(rows, matchable),
        {f"_{tag}k{i}": k for i, k in enumerate(side.key_names)},
        {f"_{tag}n": ("sum", WEIGHT), f"_{tag}t": ("max", MTIME)},
    )


def _semi_anti(
    engine: Engine[R],
    probe: _Side,
    other: _Side,
    deltas: dict[str, R],
    old: Callable[[_Side], R | None],
    changed: dict[str, bool],
) -> tuple[list[R], list[R]]:
    """The changes of the probe side's matched (semi) and unmatched (anti) rows, as keyed probe rows."""
    n = range(len(probe.keys))
    other_old = old(other)
    before = _counts(engine, other, other_old, "b") if other_old is not None else None
    moved = _counts(engine, other, deltas[other.tag], "d") if changed[other.tag] else None
    # The keys that match after the batch: `_ak<i>`.
    parts = [
        engine.select(
            engine.compute(c, {**{f"_ak{i}": f"_{t}k{i}" for i in n}, "_an": f"_{t}n"}),
            [*[f"_ak{i}" for i in n], "_an"],
        )
        for c, t in ((before, "b"), (moved, "d"))
        if c is not None
    ]
    after = engine.where(
        engine.aggregate(engine.concat(parts), {f"_ak{i}": f"_ak{i}" for i in n}, {"_an": ("sum", "_an")}),
        "_an > 0",
    )
    semi: list[R] = []
    anti: list[R] = []
    if changed[probe.tag]:
        keys = probe.against([f"_ak{i}" for i in n])
        semi.append(
            engine.lookup(deltas[probe.tag], keys, engine.select(after, [f"_ak{i}" for i in n]), "semi")
        )
        anti.append(
            engine.lookup(deltas[probe.tag], keys, engine.select(after, [f"_ak{i}" for i in n]), "anti")
        )
    probe_old = old(probe) if moved is not None else None  # (read only when keys can flip)
    if moved is not None and probe_old is not None:
        # Keys whose first match arrived (+1) or whose last match went (-1) in the batch.
        if before is not None:
            joined = engine.lookup(moved, [(f"_dk{i}", f"_bk{i}") for i in n], before, "left")
            had = "COALESCE(_bn, 0)"
        else:
            joined, had = moved, "0"
        counted = engine.compute(joined, {"_had": had, "_has": f"{had} + _dn"})
        flip = (
            "CAST(CASE WHEN _had <= 0 AND _has > 0 THEN 1 WHEN _had > 0 AND _has <= 0 THEN -1 END AS BIGINT)"
        )
        flips = engine.select(
            engine.where(engine.compute(counted, {"_flip": flip, "_ft": "_dt"}), "_flip IS NOT NULL"),
            [*[f"_dk{i}" for i in n], "_flip", "_ft"],
        )
        flipped = engine.lookup(probe_old, probe.against([f"_dk{i}" for i in n]), flips, "inner")
        for terms, sign in ((semi, ""), (anti, "-")):
            signed = engine.compute(flipped, {WEIGHT: f"{sign}{WEIGHT} * _flip", MTIME: "_ft"})
            terms.append(engine.drop(signed, ["_flip", "_ft"]))
    return semi, anti


def _unmatched_rows(
    engine: Engine[R],
    node: Join,
    sides: tuple[_Side, _Side],
    both: exp.Expression,
    deltas: dict[str, R],
    old: Callable[[_Side], R | None],
    meeting: Callable[[_Side, R], R | None],
    changed: dict[str, bool],
) -> list[R]:
    """The changes of an outer join's padded rows of the `probe` side when its condition compares the two sides
    other than by equality (a LEFT interval join): a row is padded while no row of the other side meets both
    its keys and the condition, which keys alone do not decide, so matches are counted per probe row (each row
    numbered: `_pid`). A new probe row is padded if it meets none after the batch; a probe row from before is
    padded (+1) or no longer (-1) where the other side's changes bring its first match or take its last."""
    probe, other = sides
    fields = (*node.left.fields, *node.right.fields)

    def matches(rows: R, others: R) -> R:
        """Per numbered probe row, its net number of matches among `others` (`_m`) and their latest time."""
        once = engine.compute(rows, {WEIGHT: "CAST(1 AS BIGINT)"})
        paired = (
            engine.pairs(once, others, probe.against(other.key_names), both, fields)
            if probe.tag == "l"
            else engine.pairs(others, once, other.against(probe.key_names), both, fields)
        )
        return engine.aggregate(paired, {"_pid": "_pid"}, {"_m": ("sum", WEIGHT), "_mt": ("max", MTIME)})

    def padded(rows: R) -> R:
        return engine.padded(
            engine.drop(rows, [*probe.key_names, "_pid"]),
            engine.drop(deltas[other.tag], other.key_names),
            probe.tag == "l",
        )

    by_row = [("_pid", "_pid")]
    terms: list[R] = []
    if changed[probe.tag]:
        new = engine.numbered(deltas[probe.tag], "_pid")
        other_old = old(other)
        after = deltas[other.tag] if other_old is None else engine.concat([other_old, deltas[other.tag]])
        met = engine.select(engine.where(matches(new, after), "_m > 0"), ["_pid"])
        terms.append(padded(engine.lookup(new, by_row, met, "anti")))
    # Rows from before flip only by the other side's changes.
    probe_old = old(probe) if changed[other.tag] else None
    if probe_old is not None:
        rows = engine.numbered(probe_old, "_pid")
        moved = engine.rename(engine.where(matches(rows, deltas[other.tag]), "_m <> 0"), {"_m": "_dm"})
        # Their matches before the batch: the other side read again for them (in an interval join, the read of
        # it for the probe side's changes covers other times).
        candidates = engine.lookup(rows, by_row, engine.select(moved, ["_pid"]), "semi")
        other_before = meeting(other, candidates)
        had = "0"
        if other_before is not None:
            before = matches(candidates, other_before)
            before = engine.rename(engine.select(before, ["_pid", "_m"]), {"_m": "_bm"})
            moved, had = engine.lookup(moved, by_row, before, "left"), "COALESCE(_bm, 0)"
        flip = (
            f"CAST(CASE WHEN {had} = 0 AND {had} + _dm > 0 THEN -1 "
            f"WHEN {had} > 0 AND {had} + _dm = 0 THEN 1 END AS BIGINT)"
        )
        flips = engine.select(
            engine.where(engine.compute(moved, {"_flip": flip}), "_flip IS NOT NULL"),
            ["_pid", "_flip", "_mt"],
        )
        flipped = engine.compute(
            engine.lookup(rows, by_row, flips, "inner"), {WEIGHT: f"{WEIGHT} * _flip", MTIME: "_mt"}
        )
        terms.append(padded(engine.drop(flipped, ["_flip", "_mt"])))
    return terms


def _and(parts: list[exp.Expression]) -> exp.Expression | None:
    if not parts:
        return None
    both = exp.and_(*parts, copy=False)
    assert isinstance(both, exp.Expression)
    return both
