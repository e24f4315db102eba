"""`x NOT IN (SELECT y ...)` in WHERE, as parts the engine maintains: a null-aware anti join in three conjuncts.

SQL's NOT IN is true when no y equals x, but unknown (so the row is dropped) as soon as the subquery yields a NULL,
and for a NULL x unless the subquery is empty. So, with S the subquery's rows:

    x NOT IN (SELECT y FROM s WHERE p)
      ≡ NOT EXISTS (SELECT 1 FROM s WHERE p AND s.y = x)        -- no equal value: an anti join
        AND (SELECT COUNT(*) - COUNT(y) FROM s WHERE p) = 0       -- S holds no NULL
        AND (x IS NOT NULL OR (SELECT COUNT(*) FROM s WHERE p) = 0) -- a NULL x passes only an empty S

The anti join is the binder's (plan/rewrites/decorrelate.py); the two counts are scalar subqueries, which
project/scalar_subqueries.py then makes joins of one-row (or per-key, when p correlates) aggregates.
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from mvengine.plan.nodes import conjuncts
from mvengine.project.scalar_subqueries import NOT_PLAIN, Columns, relations
from mvengine.sql.views import ViewDef


def rewrite_not_in(views: dict[str, ViewDef], columns: Columns) -> dict[str, ViewDef]:
    """The views, each `x NOT IN (subquery)` conjunct of a WHERE made the three conjuncts above."""
    out = {}
    for name, view in views.items():
        query = view.query.copy()
        notes: list[str] = []
        for select in list(query.find_all(exp.Select)):
            where = select.args.get("where")
            if where is None:
                continue
            parts: list[exp.Expr] = []
            changed = False
            for conjunct in conjuncts(where.this):
                rewritten = _rewrite(select, conjunct, columns)
                parts.extend(rewritten or [conjunct])
                if rewritten:
                    changed = True
                    notes.append(
                        f"{conjunct.sql('spark')} is NOT EXISTS with an equality, and counts of the subquery's "
                        "rows and NULLs (NOT IN's NULL semantics)"
                    )
            if changed:
                where.set("this", exp.and_(*parts))
        out[name] = replace(view, query=query, rewrites=view.rewrites + tuple(notes)) if notes else view
    return out


def _rewrite(outer: exp.Select, conjunct: exp.Expr, columns: Columns) -> list[exp.Expr] | None:
    """The three conjuncts for `conjunct` when it is `x NOT IN (SELECT y ...)` that can be rewritten, else None."""
    if not isinstance(conjunct, exp.Not):
        return None
    test = conjunct.this.this if isinstance(conjunct.this, exp.Paren) else conjunct.this
    sub = test.args.get("query") if isinstance(test, exp.In) else None
    if not isinstance(sub, exp.Subquery) or not isinstance(sub.this, exp.Select):
        return None
    inner = sub.this
    if len(inner.expressions) != 1 or any(inner.args.get(k) for k in NOT_PLAIN):
        return None
    probe = _qualified(test.this, outer, columns)
    if probe is None:
        return None
    y = inner.expressions[0].unalias()

    def counting(count: exp.Expr) -> exp.Expr:
        body = inner.copy()
        body.set("expressions", [count])
        return exp.EQ(this=exp.Subquery(this=body), expression=exp.Literal.number(0))

    matches = inner.copy()
    matches.set("expressions", [exp.Literal.number(1)])
    matches = matches.where(exp.EQ(this=y.copy(), expression=probe.copy()), copy=False)
    rows = exp.Count(this=exp.Star())
    return [
        exp.Not(this=exp.Exists(this=matches)),
        counting(exp.Sub(this=rows.copy(), expression=exp.Count(this=y.copy()))),
        exp.Paren(
            this=exp.or_(exp.Not(this=exp.Is(this=probe.copy(), expression=exp.Null())), counting(rows))
        ),
    ]


def _qualified(e: exp.Expr, select: exp.Select, columns: Columns) -> exp.Expr | None:
    """`e` with every column qualified by its relation in `select`'s FROM (so that the subquery it moves into
    does not take it for one of its own); None when a column's relation is not known."""
    known = relations(select, columns)
    if known is None:
        return None
    e = e.copy()
    for column in list(e.find_all(exp.Column)):
        if column.table:
            if column.table.lower() not in known:
                return None
            continue
        owners = [a for a, cols in known.items() if cols is not None and column.name.lower() in cols]
        if len(owners) != 1:
            return None
        column.set("table", exp.to_identifier(owners[0]))
    return e
