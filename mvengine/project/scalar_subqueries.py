"""Scalar subqueries in expressions, made LEFT JOINs of an aggregate (as DBToaster and Feldera decorrelate them).

    SELECT ... FROM part p, lineitem l WHERE ... AND l.q < (SELECT 0.2 * AVG(i.q) FROM lineitem i WHERE i.k = p.k)

is the same query as

    SELECT ... FROM part p CROSS JOIN lineitem l
      LEFT JOIN (SELECT i.k AS key1, AVG(i.q) AS agg1 FROM lineitem i GROUP BY i.k) AS scalar_1
        ON scalar_1.key1 = p.k
    WHERE ... AND l.q < 0.2 * scalar_1.agg1

The subquery grouped by its correlation keys has at most one row per key, so the LEFT JOIN gives every row of the
outer query one value, NULL where the subquery would find no rows. What an aggregate is over no rows is put back
where it is not NULL: COUNT's 0 (`COALESCE(scalar_1.agg1, 0)`). An uncorrelated subquery is a global aggregate,
one row always, joined on a constant key (`ON scalar_1.one = 1`). The grouped subquery keeps state, so
project/join_inputs.py then makes it a view of its own (`<view>__scalar_1`), and both views are incremental.

Taken: a subquery of one projection made of aggregates of its own columns (and of outer columns outside them),
correlated only by `inner = outer` equalities, in the WHERE, SELECT or HAVING of a query (in SELECT or HAVING of
a grouped query, the value is a function of the group, so it is added to GROUP BY). Anything else (no aggregate,
GROUP BY or LIMIT inside, another correlation, a column whose table's columns are not known) stays as written,
and the binder says why the view is recomputed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from sqlglot import exp

from mvengine.plan.nodes import conjuncts
from mvengine.project.join_inputs import visible_ctes
from mvengine.sql.views import ViewDef

# A source's or view's column names (lower case) by its name, None if not known.
Columns = Callable[[str], "set[str] | None"]
Relations = dict[str, "set[str] | None"]  # alias (lower case) → its columns

# What a subquery may not have for the rewrites here (the SELECT clauses that change its rows' number or order).
NOT_PLAIN = ("group", "having", "order", "limit", "offset", "distinct", "qualify", "with_", "with")
_COUNTS = (exp.Count, exp.CountIf)  # 0, not NULL, over no rows


def rewrite_scalar_subqueries(views: dict[str, ViewDef], columns: Columns) -> dict[str, ViewDef]:
    """The views, each scalar subquery that can be one made a LEFT JOIN (with a note for `mv plan`)."""

    def rewrite(select: exp.Select, taken: set[str]) -> list[str]:
        notes = []
        for sub in list(select.find_all(exp.Subquery)):
            if sub.find_ancestor(exp.Select) is select and _is_scalar(sub):
                written = sub.sql("spark")
                try:
                    notes.append(f"the scalar subquery {written} is {_rewrite(select, sub, taken, columns)}")
                except _Stays as why:
                    notes.append(f"the scalar subquery {written} stays in its expression: {why}")
        return notes

    return rewrite_selects(views, rewrite, inner_first=True)


def rewrite_selects(
    views: dict[str, ViewDef],
    rewrite: Callable[[exp.Select, set[str]], list[str]],
    inner_first: bool = False,
) -> dict[str, ViewDef]:
    """The views, `rewrite(select, taken)` applied to each SELECT of a copy of each view's query (`taken`: the
    aliases in use, for new ones), with the notes it returns for `mv plan`; a view it notes nothing of stays."""
    out = {}
    for name, view in views.items():
        query = view.query.copy()
        notes: list[str] = []
        taken = {a.lower() for a in aliases(query)}
        selects = list(query.find_all(exp.Select))
        for select in reversed(selects) if inner_first else selects:
            notes.extend(rewrite(select, taken))
        out[name] = replace(view, query=query, rewrites=view.rewrites + tuple(notes)) if notes else view
    return out


class _Stays(Exception):
    """Why a scalar subquery is left as written (the binder then plans the view in full)."""


def _rewrite(outer: exp.Select, sub: exp.Subquery, taken: set[str], columns: Columns) -> str:
    """Make `sub` a LEFT JOIN of `outer`; what it became, in words (raises _Stays with the reason it cannot)."""
    inner = sub.this
    if not isinstance(inner, exp.Select) or any(inner.args.get(k) for k in NOT_PLAIN):
        raise _Stays("it is not one SELECT without GROUP BY, HAVING, ORDER BY, LIMIT, DISTINCT or WITH")
    if len(inner.expressions) != 1 or not (inner.args.get("from_") or inner.args.get("from")):
        raise _Stays("it does not select one expression FROM a table")
    if any(isinstance(n, (exp.Subquery, exp.Exists, exp.Window)) for n in inner.walk() if n is not inner):
        raise _Stays("it holds a subquery or a window function")
    ctes = [t.name for t in inner.find_all(exp.Table) if not t.db and t.name.lower() in visible_ctes(inner)]
    if ctes:
        raise _Stays(f"it reads {ctes[0]}, a CTE of the view's query, which a view of its own could not read")
    mine = relations(inner, columns)
    theirs = relations(outer, columns)
    if mine is None or theirs is None:
        raise _Stays(
            "the columns of a table it or its query reads are not known before planning (a SELECT *)"
        )

    sides = Sides(mine, theirs)
    projection = inner.expressions[0].unalias()
    aggregates = _top_aggregates(projection)
    if not aggregates:
        raise _Stays("it selects no aggregate (so it is not known to give one row)")
    for c in projection.find_all(exp.Column):
        in_aggregate = c.find_ancestor(exp.AggFunc) is not None
        if not (sides.inner(c) if in_aggregate else sides.outer(c)):
            inside = "inside" if in_aggregate else "outside"
            raise _Stays(
                f"{c.sql('spark')} {inside} an aggregate is not a column of the table it reads there"
            )
    keys, rest, stray = sides.correlation(inner)
    if stray is not None:
        raise _Stays(f"it is correlated by {stray.sql('spark')}, not by an equality of inner and outer")
    place = _clause(sub, outer)
    grouped = bool(outer.args.get("group"))
    if place not in ("where", "expressions", "having"):
        raise _Stays(f"it is in {place}, not in WHERE, SELECT or HAVING")
    if place != "where" and not grouped and _aggregates(outer):
        raise _Stays("it is in the SELECT list or HAVING of an aggregate without GROUP BY")

    body = inner.copy()
    body.set("expressions", [exp.alias_(k.copy(), f"key{i}") for i, (k, _) in enumerate(keys, 1)])
    body.set("where", exp.Where(this=exp.and_(*rest)) if rest else None)
    if keys:
        body.set("group", exp.Group(expressions=[k.copy() for k, _ in keys]))
    # Subqueries over the same rows with the same correlation share one join (one view): NOT IN's two counts,
    # or SUM and COUNT of the same lines.
    signature = " | ".join([body.sql("spark"), *(o.sql("spark") for _, o in keys)])
    shared = next(
        (
            j.this
            for j in outer.args.get("joins") or []
            if isinstance(j.this, exp.Subquery) and j.this.meta.get("scalar") == signature
        ),
        None,
    )
    if shared is None:
        alias = fresh_alias("scalar", taken)
        if not keys:
            body.set("expressions", [exp.alias_(exp.Literal.number(1), "one")])
        condition = (
            exp.and_(
                *(
                    exp.EQ(this=exp.column(f"key{i}", alias), expression=o.copy())
                    for i, (_, o) in enumerate(keys, 1)
                )
            )
            if keys
            else exp.EQ(this=exp.column("one", alias), expression=exp.Literal.number(1))
        )
        shared = exp.Subquery(this=body, alias=exp.TableAlias(this=exp.to_identifier(alias)))
        shared.meta["scalar"] = signature
        outer.append("joins", exp.Join(this=shared, side="LEFT", on=condition))
    alias = shared.alias
    made = {e.this.sql("spark"): e.alias for e in shared.this.expressions if e.alias.startswith("agg")}
    names = []
    for aggregate in aggregates:  # each aggregate once: NOT IN's COUNT(*) twice is one column
        if aggregate.sql("spark") not in made:
            made[aggregate.sql("spark")] = f"agg{len(made) + 1}"
            shared.this.append("expressions", exp.alias_(aggregate.copy(), made[aggregate.sql("spark")]))
        names.append(made[aggregate.sql("spark")])
    holder = exp.Paren(this=projection.copy())  # a parent, so that an aggregate at the top is replaced too
    for name, aggregate in zip(names, _top_aggregates(holder)):
        joined: exp.Expr = exp.column(name, alias)
        if isinstance(aggregate, _COUNTS):
            joined = exp.func("COALESCE", joined, exp.Literal.number(0))
        aggregate.replace(joined)
    value = holder.this
    sub.replace(value if isinstance(value, (exp.Column, exp.Func, exp.Paren)) else exp.Paren(this=value))
    if grouped and place != "where":
        for name in dict.fromkeys(names):
            outer.args["group"].append("expressions", exp.column(name, alias))
    by = ", ".join(k.sql("spark") for k, _ in keys)
    how = f"the LEFT JOIN of its aggregate by {by}" if keys else "a join of its aggregate (one row)"
    return f"{how}: {alias}"


def _top_aggregates(e: exp.Expr) -> list[exp.AggFunc]:
    """The aggregates of `e` not inside another one, in the order find_all gives (the same for a copy)."""
    return [a for a in e.find_all(exp.AggFunc) if a is e or a.find_ancestor(exp.AggFunc) is None]


def _is_scalar(sub: exp.Subquery) -> bool:
    """A subquery used as a value: not a FROM item, not IN's or EXISTS's, not a set operation's side."""
    parent = sub.parent
    if isinstance(parent, (exp.From, exp.Join, exp.Exists, exp.Union, exp.Lateral)):
        return False
    return not (isinstance(parent, exp.In) and parent.args.get("query") is sub)


def _clause(node: exp.Expr, select: exp.Select) -> str | None:
    """Which argument of `select` holds `node`: where, having, expressions (the SELECT list), ..."""
    while node.parent is not None and node.parent is not select:
        node = node.parent
    return node.arg_key if node.parent is select else None


def _aggregates(select: exp.Select) -> bool:
    """Whether the SELECT list aggregates (not counting aggregates inside its subqueries)."""
    return any(a.find_ancestor(exp.Select) is select for e in select.expressions for a in _top_aggregates(e))


def _only(e: exp.Expr, test: Callable[[exp.Column], bool]) -> bool:
    """`e` reads columns, and only columns that pass `test`."""
    found = list(e.find_all(exp.Column))
    return bool(found) and all(test(c) for c in found)


def relations(select: exp.Select, columns: Columns) -> Relations | None:
    """The FROM items of `select` by alias, with their columns (None where not known); None when an item is
    neither a table nor a subquery."""
    ctes = visible_ctes(select)
    found: Relations = {}
    for item in from_items(select):
        if isinstance(item, exp.Table) and not item.db and item.name.lower() in ctes:
            cte = ctes[item.name.lower()]
            names = [n.lower() for n in (cte.alias_column_names or cte.this.named_selects)]
            found[item.alias_or_name.lower()] = None if "*" in names else set(names)
        elif isinstance(item, exp.Table):
            found[item.alias_or_name.lower()] = None if item.db else columns(item.name)
        elif isinstance(item, exp.Subquery) and item.alias and isinstance(item.this, exp.Query):
            names = [n.lower() for n in item.this.named_selects]
            found[item.alias.lower()] = None if "*" in names else set(names)
        else:
            return None
    return found


def from_items(select: exp.Select) -> list[exp.Expr]:
    """What `select` reads: its FROM item and each joined one."""
    from_ = select.args.get("from_") or select.args.get("from")
    return ([from_.this] if from_ is not None else []) + [j.this for j in select.args.get("joins") or []]


def tables_of(select: exp.Select) -> dict[str, exp.Table]:
    """The tables (and views) among the FROM items of `select`, by lower-case alias."""
    return {t.alias_or_name.lower(): t for t in from_items(select) if isinstance(t, exp.Table)}


def owner(c: exp.Column, relations: Relations) -> str | None:
    """The alias of the relation a column reads: its qualifier, or the one relation with a column of its name
    (None when none or several have one)."""
    if c.table:
        return c.table.lower()
    found = [a for a, cols in relations.items() if cols is not None and c.name.lower() in cols]
    return found[0] if len(found) == 1 else None


class Sides:
    """Which columns of a subquery are its own (of `mine`, its FROM's relations by alias) and which are of the
    query it is in (`theirs`), never of one further out."""

    def __init__(self, mine: Relations, theirs: Relations) -> None:
        self.mine, self.theirs = mine, theirs

    def inner(self, c: exp.Column) -> bool:
        if c.table:
            return c.table.lower() in self.mine
        return any(c.name.lower() in cols for cols in self.mine.values() if cols is not None)

    def outer(self, c: exp.Column) -> bool:
        if c.table:
            return c.table.lower() in self.theirs and c.table.lower() not in self.mine
        return not self.inner(c) and any(
            c.name.lower() in cols for cols in self.theirs.values() if cols is not None
        )

    def correlation(
        self, select: exp.Select
    ) -> tuple[list[tuple[exp.Expr, exp.Expr]], list[exp.Expr], exp.Expr | None]:
        """The subquery's WHERE as (inner, outer) pairs of its `inner = outer` equalities, its conjuncts of its
        own columns alone, and the first conjunct that is neither (None when there is none)."""
        keys: list[tuple[exp.Expr, exp.Expr]] = []
        rest: list[exp.Expr] = []
        where = select.args.get("where")
        for conjunct in conjuncts(where.this) if where is not None else []:
            if all(self.inner(c) for c in conjunct.find_all(exp.Column)):
                rest.append(conjunct)
                continue
            a, b = conjunct.this, conjunct.expression
            if isinstance(conjunct, exp.EQ) and _only(a, self.inner) and _only(b, self.outer):
                keys.append((a, b))
            elif isinstance(conjunct, exp.EQ) and _only(b, self.inner) and _only(a, self.outer):
                keys.append((b, a))
            else:
                return keys, rest, conjunct
        return keys, rest, None


def aliases(query: exp.Expr) -> list[str]:
    """The names the query's tables and subqueries are known by (taken, for a new alias)."""
    return [t.alias_or_name for t in query.find_all(exp.Table)] + [
        s.alias for s in query.find_all(exp.Subquery) if s.alias
    ]


def fresh_alias(stem: str, taken: set[str]) -> str:
    """`stem_1`, or the first `stem_N` not taken (and now taken)."""
    n = 1
    while f"{stem}_{n}" in taken:
        n += 1
    taken.add(f"{stem}_{n}")
    return f"{stem}_{n}"
