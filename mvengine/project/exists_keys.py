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

A subquery correlated by a condition other than an equality too (TPC-H Q21's "another supplier of the order"):

    FROM lineitem l1 ... WHERE EXISTS (SELECT 1 FROM lineitem l2 WHERE l2.order = l1.order AND l2.supp <> l1.supp)

tests a view of the outer rows' correlated columns that have a match, the join of the outer table and the
subquery's table on all of its conditions:

    WHERE EXISTS (SELECT 1 FROM (SELECT DISTINCT l1.order AS key1, l1.supp AS key2
                                 FROM lineitem l1 JOIN lineitem l2 ON l2.order = l1.order AND l2.supp <> l1.supp)
                  AS exists_1 WHERE exists_1.key1 = l1.order AND exists_1.key2 = l1.supp)

The subquery's value is a function of those columns alone, so the semi (anti) join on them is the same test; the
view is an equi-join and a DISTINCT, both maintained. A NULL in an outer column would match nothing in the view
where the subquery could have matched, so every condition that reads an outer column must be a comparison of
plain arithmetic (NULL in, no match out).

Taken: a `[NOT] EXISTS` conjunct of a WHERE whose subquery is one SELECT of one table or view, without GROUP BY,
HAVING, ORDER BY, LIMIT, DISTINCT or WITH, correlated by `inner = outer` equalities, and by other comparisons of
columns of one table of the outer query. Anything else (no equality; an OR or a function over an outer column;
outer columns of two tables; no correlation: a one-row test; joins inside) stays as written.
"""

from __future__ import annotations

from sqlglot import exp

from mvengine.plan.nodes import conjuncts
from mvengine.project.join_inputs import visible_ctes
from mvengine.project.scalar_subqueries import (
    NOT_PLAIN,
    Columns,
    Sides,
    fresh_alias,
    owner,
    relations,
    rewrite_selects,
    tables_of,
)
from mvengine.sql.views import ViewDef


def rewrite_exists_keys(views: dict[str, ViewDef], columns: Columns) -> dict[str, ViewDef]:
    """The views, each `[NOT] EXISTS` that can be one made a test on its distinct keys (with a note)."""

    def rewrite(select: exp.Select, taken: set[str]) -> list[str]:
        notes = []
        where = select.args.get("where")
        for conjunct in conjuncts(where.this) if where is not None else []:
            test = conjunct.this if isinstance(conjunct, exp.Not) else conjunct
            test = test.this if isinstance(test, exp.Paren) else test
            if not (isinstance(test, exp.Exists) and isinstance(test.this, exp.Select)):
                continue
            written = test.sql("spark")
            keys = _rewrite(select, test, taken, columns)
            if keys:
                notes.append(f"{written} tests the distinct keys ({keys}) of its rows: a view of them")
                continue
            matched = _rewrite_residual(select, test, taken, columns)
            if matched:
                notes.append(
                    f"{written} tests the distinct values of {matched} that have a match: a view of them, the "
                    "join of the two tables on the subquery's conditions"
                )
        return notes

    return rewrite_selects(views, rewrite)


def _one_table(inner: exp.Select) -> exp.Table | None:
    """The table or view a plain subquery of one FROM item reads (None for any other subquery)."""
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
    return from_.this


def _rewrite(outer: exp.Select, test: exp.Exists, taken: set[str], columns: Columns) -> str | None:
    """Make `test`'s subquery read its distinct keys; the keys in words, or None when it stays as written."""
    inner = test.this
    if _one_table(inner) is None:
        return None
    mine, theirs = relations(inner, columns), relations(outer, columns)
    if mine is None or theirs is None:
        return None
    keys, rest, stray = Sides(mine, theirs).correlation(inner)
    if stray is not None or not keys:
        return None
    body = inner.copy()
    body.set("expressions", [exp.alias_(k.copy(), f"key{i}") for i, (k, _) in enumerate(keys, 1)])
    body.set("where", exp.Where(this=exp.and_(*rest)) if rest else None)
    _test_keys(test, body, [o for _, o in keys], taken)
    return ", ".join(k.sql("spark") for k, _ in keys)


def _test_keys(test: exp.Exists, body: exp.Select, outer_values: list[exp.Expr], taken: set[str]) -> None:
    """Make `test` the test of `body`'s distinct rows (its columns key1, key2, ...) against the outer values."""
    alias = fresh_alias("exists", taken)
    body.set("distinct", exp.Distinct())  # (of an append-only input, append-only too: keys never leave)
    grouped = exp.Subquery(this=body, alias=exp.TableAlias(this=exp.to_identifier(alias)))
    condition = exp.and_(
        *(
            exp.EQ(this=exp.column(f"key{i}", alias), expression=o.copy())
            for i, o in enumerate(outer_values, 1)
        )
    )
    test.set("this", exp.select(exp.Literal.number(1)).from_(grouped).where(condition))


# What a condition on an outer column may be made of: each gives NULL for a NULL operand.
_STRICT = (exp.Column, exp.Identifier, exp.Literal, exp.Paren, exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Neg)
_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)


def _rewrite_residual(outer: exp.Select, test: exp.Exists, taken: set[str], columns: Columns) -> str | None:
    """Make `test`'s subquery, correlated by an equality and by other comparisons with the columns of one outer
    table, read the distinct values of those columns that have a match; those columns in words, or None when
    it stays as written."""
    inner = test.this
    table = _one_table(inner)
    mine, theirs = relations(inner, columns), relations(outer, columns)
    if table is None or mine is None or theirs is None:
        return None
    sides = Sides(mine, theirs)
    where = inner.args.get("where")
    own, correlated = [], []
    for conjunct in conjuncts(where.this) if where is not None else []:
        found = list(conjunct.find_all(exp.Column))
        if all(sides.inner(c) for c in found):
            own.append(conjunct)
        elif not all(sides.inner(c) or sides.outer(c) for c in found):
            return None  # a column of a query further out
        elif isinstance(conjunct, _COMPARISONS) and all(
            isinstance(n, _STRICT) for n in conjunct.walk() if n is not conjunct
        ):
            correlated.append(conjunct)
        else:
            return None
    if not any(_is_key(c, sides) for c in correlated):
        return None  # no equality: the view would be a join without one, recomputed in full
    outer_columns = {
        (c.table.lower(), c.name.lower()): c
        for conjunct in correlated
        for c in conjunct.find_all(exp.Column)
        if not sides.inner(c)
    }
    owners = {owner(c, theirs) for c in outer_columns.values()}
    if len(owners) != 1 or None in owners:
        return None
    outer_alias = owners.pop()
    assert outer_alias is not None
    tables = tables_of(outer)
    if outer_alias not in tables or outer_alias in mine or tables[outer_alias].db:
        return None  # not a table (or view) of the outer query, or known by the subquery's alias too
    if tables[outer_alias].name.lower() in visible_ctes(outer):
        return None
    inner_alias = table.alias_or_name
    body = exp.select(
        *(
            exp.alias_(exp.column(c.name, outer_alias), f"key{i}")
            for i, c in enumerate(outer_columns.values(), 1)
        )
    ).from_(tables[outer_alias].copy())
    condition = []
    for conjunct in correlated:
        qualified = conjunct.copy()
        for c in qualified.find_all(exp.Column):
            c.set("table", exp.to_identifier(outer_alias if sides.outer(c) else inner_alias))
        condition.append(qualified)
    body = body.join(table.copy(), on=exp.and_(*condition))
    if own:
        body = body.where(exp.and_(*(c.copy() for c in own)))
    _test_keys(test, body, [c.copy() for c in outer_columns.values()], taken)
    return ", ".join(c.sql("spark") for c in outer_columns.values())


def _is_key(conjunct: exp.Expr, sides: Sides) -> bool:
    """An equality of an inner and an outer expression."""
    if not isinstance(conjunct, exp.EQ):
        return False
    a, b = (list(side.find_all(exp.Column)) for side in (conjunct.this, conjunct.expression))
    return bool(a and b) and (
        (all(map(sides.inner, a)) and all(map(sides.outer, b)))
        or (all(map(sides.outer, a)) and all(map(sides.inner, b)))
    )
