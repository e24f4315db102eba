"""`[NOT] EXISTS` over a table's rows, made `[NOT] EXISTS` over the subquery's distinct correlation keys.

    WHERE EXISTS (SELECT 1 FROM sales s WHERE s.customer = c.id AND s.amount > 995)

is the same condition as

    WHERE EXISTS (SELECT 1 FROM (SELECT DISTINCT s.customer AS key1 FROM sales s WHERE s.amount > 995) AS exists_1
                  WHERE exists_1.key1 = c.id)

A semi or anti join (plan/rewrites/decorrelate.py) learns whether a key has rows on the subquery's side by reading
that side's rows of the keys the batch touches, as they were before the batch. Over a fact table those rows are
spread through all of its files, so a batch of a few changes read the whole table. The distinct keys are one
row per key; project/join_inputs.py makes them a view of its own (`<view>__exists_1`), whose batches are a
DISTINCT's over the changed rows, and the join then reads at most one row per key of it: the counterpart of the
index Feldera and DBToaster keep of a semi join's other side.

Taken: a `[NOT] EXISTS` conjunct of a WHERE whose subquery is one SELECT of one table or view, without GROUP BY,
HAVING, ORDER BY, LIMIT, DISTINCT or WITH, correlated only by `inner = outer` equalities. Anything else (another
correlation: a non-equality residual; no correlation: a one-row test; joins inside) stays as written.
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from mvengine.plan.nodes import conjuncts
from mvengine.project.join_inputs import visible_ctes
from mvengine.project.scalar_subqueries import NOT_PLAIN, Columns, Sides, aliases, fresh_alias, relations
from mvengine.sql.views import ViewDef


def rewrite_exists_keys(views: dict[str, ViewDef], columns: Columns) -> dict[str, ViewDef]:
    """The views, each `[NOT] EXISTS` that can be one made a test on its distinct keys (with a note)."""
    out = {}
    for name, view in views.items():
        query = view.query.copy()
        notes: list[str] = []
        taken = {a.lower() for a in aliases(query)}
        for select in list(query.find_all(exp.Select)):
            where = select.args.get("where")
            for conjunct in conjuncts(where.this) if where is not None else []:
                test = conjunct.this if isinstance(conjunct, exp.Not) else conjunct
                test = test.this if isinstance(test, exp.Paren) else test
                if isinstance(test, exp.Exists) and isinstance(test.this, exp.Select):
                    written = test.sql("spark")
                    keys = _rewrite(select, test, taken, columns)
                    if keys:
                        notes.append(
                            f"{written} tests the distinct keys ({keys}) of its rows: a view of them"
                        )
        out[name] = replace(view, query=query, rewrites=view.rewrites + tuple(notes)) if notes else view
    return out


def _rewrite(outer: exp.Select, test: exp.Exists, taken: set[str], columns: Columns) -> str | None:
    """Make `test`'s subquery read its distinct keys; the keys in words, or None when it stays as written."""
    inner = test.this
    from_ = inner.args.get("from_") or inner.args.get("from")
    if from_ is None or inner.args.get("joins") or any(inner.args.get(k) for k in NOT_PLAIN):
        return None
    if not isinstance(from_.this, exp.Table) or from_.this.db:
        return None
    if from_.this.name.lower() in visible_ctes(inner):
        return None  # a CTE of the query: a view of its own could not read it
    if any(
        isinstance(n, (exp.Subquery, exp.Exists, exp.Window, exp.AggFunc))
        for n in inner.walk()
        if n is not inner
    ):
        return None
    mine, theirs = relations(inner, columns), relations(outer, columns)
    if mine is None or theirs is None:
        return None
    keys, rest, stray = Sides(mine, theirs).correlation(inner)
    if stray is not None or not keys:
        return None
    alias = fresh_alias("exists", taken)
    body = inner.copy()
    body.set("expressions", [exp.alias_(k.copy(), f"key{i}") for i, (k, _) in enumerate(keys, 1)])
    body.set("where", exp.Where(this=exp.and_(*rest)) if rest else None)
    body.set("distinct", exp.Distinct())  # (of an append-only input, append-only too: keys never leave)
    grouped = exp.Subquery(this=body, alias=exp.TableAlias(this=exp.to_identifier(alias)))
    condition = exp.and_(
        *(exp.EQ(this=exp.column(f"key{i}", alias), expression=o.copy()) for i, (_, o) in enumerate(keys, 1))
    )
    test.set("this", exp.select(exp.Literal.number(1)).from_(grouped).where(condition))
    return ", ".join(k.sql("spark") for k, _ in keys)
