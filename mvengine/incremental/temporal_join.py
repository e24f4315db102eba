"""Temporal joins (`JOIN dim FOR SYSTEM_TIME AS OF f.ts AS d ON f.k = d.k`, inner or left) as delta rules.

The dimension's rows are its versions: of the rows of one key, each is valid from its version time (the
dimension's event-time column) until the next. J(F, D) joins each fact row to the rows of the version valid at its
time: for each distinct (key, time) of the facts, the latest version time at or before it. J is linear in F, not
in D (a new version moves the facts of its key from its time on), so

    Δ = J(ΔF, D₁) + J(F₀', D₁) − J(F₀', D₀)

where D₁ = D₀ + ΔD and F₀' is the facts before the batch whose key a change of the dimension carries and whose time
is at or after the earliest version time it touched (the only rows whose version can move). A fact arriving
joins the version valid at its time, as the dimension is after the batch; a version arriving later than the
facts of its time re-joins them, so the view stays the SQL's answer over the inputs at the recorded versions.
Like a join, the rule keeps no state: both sides are read at the batch's input versions.

The version valid at each fact's time is found without comparing every pair: per key, the fact times and the
version times in one order (a version before a fact of its own time), a fact's position less its position among
the facts is the number of versions up to it, which names its version by the versions' own positions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from sqlglot import exp

from mvengine.incremental.engine import Engine
from mvengine.incremental.zset import WEIGHT
from mvengine.plan.nodes import TemporalJoin

NODE = TemporalJoin  # the plan node type this module maintains (plan/operators/temporal_join.py)

R = TypeVar("R")

# The latest TIMESTAMP Spark writes (9999-12-31 23:59:59.999999), in microseconds: an open end of a time range.
_LAST_INSTANT = 253_402_300_799_999_999


def rule(node: TemporalJoin, engine: Engine[R]) -> R:
    n = range(len(node.equi))
    fact_keys, dim_keys = [f"_lk{i}" for i in n], [f"_rk{i}" for i in n]

    def facts(rows: R) -> R:
        return engine.keyed(
            rows, node.left, {**dict(zip(fact_keys, (a for a, _ in node.equi))), "_lq": node.as_of}, None
        )

    def versions(rows: R) -> R:
        return engine.keyed(
            rows, node.right, {**dict(zip(dim_keys, (b for _, b in node.equi))), "_rv": node.version}, None
        )

    fact_changes, dim_changes = facts(engine.child(node.left)), versions(engine.child(node.right))
    read = engine.before(
        node.right, [b for _, b in node.equi], [(fact_changes, fact_keys), (dim_changes, dim_keys)]
    )
    dim_before = None if read is None else versions(read)
    dim_after = dim_changes if dim_before is None else engine.concat([dim_before, dim_changes])

    def joined(fact_rows: R, dim_rows: R) -> R:
        return _as_of_join(node, engine, fact_rows, dim_rows, fact_keys, dim_keys)

    terms = []
    if engine.changed(node.left):
        terms.append(joined(fact_changes, dim_after))
    if engine.changed(node.right) and dim_before is not None:
        moved = _facts_moved(node, engine, dim_changes, dim_keys, fact_keys, facts)
        if moved is not None:
            terms.append(joined(moved, dim_after))
            terms.append(engine.compute(joined(moved, dim_before), {WEIGHT: f"-{WEIGHT}"}))
    if not terms:  # nothing under this join changed (the batch's changes are elsewhere in the view)
        terms.append(engine.empty(joined(fact_changes, dim_changes)))
    return engine.joined(engine.concat(terms), node)


def _facts_moved(
    node: TemporalJoin,
    engine: Engine[R],
    dim_changes: R,
    dim_keys: list[str],
    fact_keys: list[str],
    facts: Callable[[R], R],
) -> R | None:
    """The facts before the batch whose version a change of the dimension can move: of the keys it carries, at or
    after the earliest version time it touches (None: none can move)."""
    times = engine.time_range(dim_changes, node.right, node.version)
    if times is None:
        return None
    within = (node.as_of, times[0], _LAST_INSTANT)
    read = engine.before(node.left, [a for a, _ in node.equi], [(dim_changes, dim_keys)], within)
    if read is None:
        return None
    keyed = facts(read)
    carried = engine.select(dim_changes, dim_keys)
    return engine.lookup(keyed, list(zip(fact_keys, dim_keys)), carried, "semi")


def _as_of_join(
    node: TemporalJoin,
    engine: Engine[R],
    fact_rows: R,
    dim_rows: R,
    fact_keys: list[str],
    dim_keys: list[str],
) -> R:
    """J(F, D): each fact row paired with the dimension rows of the version valid at its time (weights
    multiplied), and in a left join, each fact row with none padded with NULLs."""
    n = range(len(fact_keys))
    ask_keys = [f"_ak{i}" for i in n]
    known = " AND ".join(f"{k} IS NOT NULL" for k in [*ask_keys, "_at"])
    asked = engine.aggregate(
        engine.where(fact_rows, " AND ".join(f"{k} IS NOT NULL" for k in [*fact_keys, "_lq"])),
        {**dict(zip(ask_keys, fact_keys)), "_at": "_lq"},
        {"_an": ("count", "_lq")},
    )
    held = engine.where(
        engine.aggregate(dim_rows, {**dict(zip(ask_keys, dim_keys)), "_at": "_rv"}, {"_an": ("sum", WEIGHT)}),
        f"_an > 0 AND {known}",
    )
    columns = [*ask_keys, "_at", "_av"]
    times = engine.concat(
        [engine.select(engine.compute(rel, {"_av": str(v)}), columns) for rel, v in ((held, 1), (asked, 0))]
    )
    at = exp.Ordered(this=exp.column("_at"), nulls_first=False)
    version_first = exp.Ordered(this=exp.column("_av"), desc=True, nulls_first=False)
    ranked = engine.rank(times, ask_keys, [at, version_first], [], {"_pi": "row_number"})
    ranked = engine.rank(ranked, [*ask_keys, "_av"], [at], [], {"_si": "row_number"})
    # A fact time's version: the `_pi - _si`-th version time of its key (0: none before it).
    valid = engine.lookup(
        engine.compute(engine.where(ranked, "_av = 0"), {"_vi": "_pi - _si"}),
        [*zip(ask_keys, [f"_bk{i}" for i in n]), ("_vi", "_bi")],
        engine.rename(
            engine.select(engine.where(ranked, "_av = 1"), [*ask_keys, "_si", "_at"]),
            {**{k: f"_bk{i}" for i, k in enumerate(ask_keys)}, "_si": "_bi", "_at": "_bt"},
        ),
        "inner",
    )
    valid = engine.select(valid, [*ask_keys, "_at", "_bt"])
    fact_at = [*zip(fact_keys, ask_keys), ("_lq", "_at")]
    found = engine.drop(engine.lookup(fact_rows, fact_at, valid, "inner"), ["_lq"])
    fields = (*node.left.fields, *node.right.fields)
    pairs = engine.pairs(found, dim_rows, [*zip(fact_keys, dim_keys), ("_bt", "_rv")], None, fields)
    if node.kind != "left":
        return pairs
    unmatched = engine.drop(engine.lookup(fact_rows, fact_at, valid, "anti"), [*fact_keys, "_lq"])
    padded = engine.padded(unmatched, engine.drop(dim_rows, [*dim_keys, "_rv"]), True)
    return engine.concat([pairs, padded])
