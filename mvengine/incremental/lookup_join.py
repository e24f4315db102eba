"""Lookup joins (`JOIN dim FOR SYSTEM_TIME AS OF f.proc AS d ON f.k = d.k`, where f.proc is PROCTIME(); inner or
left) as delta rules.

Each fact row meets the dimension as it is when the row arrives: at the input versions of the batch that brings
it (D₁, the dimension after the batch). A later change of the dimension revises nothing, so the rule is

    Δ = ΔF ⋈ D₁    (and in a left join, ΔF's rows whose key no row of D₁ holds, padded with NULLs)

and a batch that changes only the dimension changes nothing. The facts are append-only (PROCTIME() over an input
that updates or deletes rows is refreshed in full: plan.analysis), so no joined row is ever retracted. D₁ is read
for the keys of the new facts only: D₀ by time travel at the batch's start versions, plus ΔD. Like a join, the
rule keeps no state, and the dimension version each batch read is the one its commit records.
"""

from __future__ import annotations

from typing import TypeVar

from mvengine.incremental.engine import Engine
from mvengine.incremental.zset import WEIGHT
from mvengine.plan.nodes import LookupJoin

NODE = LookupJoin  # the plan node type this module maintains (plan/operators/lookup_join.py)

R = TypeVar("R")


def rule(node: LookupJoin, engine: Engine[R]) -> R:
    n = range(len(node.equi))
    fact_keys, dim_keys = [f"_lk{i}" for i in n], [f"_rk{i}" for i in n]

    def dimension(rows: R) -> R:
        return engine.keyed(rows, node.right, dict(zip(dim_keys, (b for _, b in node.equi))), None)

    facts = engine.keyed(
        engine.child(node.left), node.left, dict(zip(fact_keys, (a for a, _ in node.equi))), None
    )
    dim = dimension(engine.child(node.right))
    keys, fields = list(zip(fact_keys, dim_keys)), (*node.left.fields, *node.right.fields)
    if not engine.changed(node.left):  # (the dimension's own changes revise nothing)
        return engine.joined(engine.empty(engine.pairs(facts, dim, keys, None, fields)), node)
    read = engine.before(node.right, [b for _, b in node.equi], [(facts, fact_keys)])
    if read is not None:  # D₁ = D₀ + ΔD, for the new facts' keys
        dim = engine.concat([dimension(read), dim])
    terms = [engine.pairs(facts, dim, keys, None, fields)]
    if node.kind == "left":
        held = engine.where(
            engine.aggregate(
                engine.where(dim, " AND ".join(f"{k} IS NOT NULL" for k in dim_keys)),
                {f"_ak{i}": k for i, k in enumerate(dim_keys)},
                {"_an": ("sum", WEIGHT)},
            ),
            "_an > 0",
        )
        matched = engine.select(held, [f"_ak{i}" for i in n])
        unmatched = engine.lookup(facts, list(zip(fact_keys, (f"_ak{i}" for i in n))), matched, "anti")
        terms.append(engine.padded(engine.drop(unmatched, fact_keys), engine.drop(dim, dim_keys), True))
    return engine.joined(engine.concat(terms), node)
