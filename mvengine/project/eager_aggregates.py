"""A table re-tested against a per-key aggregate, aggregated before the join by what the test reads (eager
aggregation, as DBToaster maintains TPC-H Q17).

    SELECT p.brand, SUM(s.amount) FROM sales s JOIN products p ON s.product = p.id
    WHERE s.quantity < (SELECT 0.5 * AVG(s2.quantity) FROM sales s2 WHERE s2.product = p.id) GROUP BY p.brand

becomes, once project/scalar_subqueries.py has made the subquery a LEFT JOIN of `scalar_1` (AVG by product),

    SELECT p.brand, CAST(SUM(eager_1.agg_1) AS DECIMAL(22, 2))
    FROM (SELECT s.product AS product, s.quantity AS quantity, SUM(s.amount) AS agg_1, COUNT(*) AS agg_2
          FROM sales s GROUP BY s.product, s.quantity) AS eager_1
      JOIN products p ON eager_1.product = p.id LEFT JOIN scalar_1 ON ...
    WHERE eager_1.quantity < 0.5 * scalar_1.agg1 GROUP BY p.brand

When a batch moves a product's average, every sale of that product must be tested again: in a fact table, a
thousand rows per key, and a moved aggregate for most keys at every batch. Grouped by the columns the query reads
outside its aggregates, the sales are one row per (product, quantity): ten per product. The group's partial
aggregates compose to the query's own: a SUM of SUMs (cast back to the type SUM gives the rows, since a second
SUM widens a decimal by 10 digits), a SUM of COUNTs (0 over no rows), a MIN of MINs. The grouped subquery keeps
state, so project/join_inputs.py makes it a view of its own (`<view>__eager_1`). Conjuncts of the WHERE over the
table's columns alone move into that view, so they add no column to its key.

Taken: a grouped query (or one aggregate of all its rows) whose WHERE compares a column of a source table with a
scalar subquery's aggregate (per key, or of all rows), where that table is an inner join input (no RIGHT or FULL
join in the query, no LEFT JOIN to it), its aggregates are SUM (of integers or decimals), COUNT, MIN and MAX of its
columns alone (or COUNT(*), or MIN/MAX of other columns), without DISTINCT or FILTER, the query has no window,
DISTINCT or other subquery left, and its columns read outside the aggregates are not a key of the table (one row
per row). Anything else stays as written, with the reason in `mv plan`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from sqlglot import exp

from mvengine.plan.nodes import conjuncts
from mvengine.plan.types import T as Type
from mvengine.plan.types import aggregate_type, infer_type
from mvengine.project.join_inputs import visible_ctes
from mvengine.project.scalar_subqueries import (
    Columns,
    fresh_alias,
    owner,
    relations,
    rewrite_selects,
    tables_of,
)
from mvengine.sql.views import ViewDef

# A source's column types (lower-case name → type) and its key, by the source's name; None for a view.
SourceTypes = Callable[[str], "tuple[dict[str, exp.DataType], tuple[str, ...] | None] | None"]

_INTEGRAL = {Type.TINYINT, Type.SMALLINT, Type.INT, Type.BIGINT}


def rewrite_eager_aggregates(
    views: dict[str, ViewDef], columns: Columns, source_types: SourceTypes
) -> dict[str, ViewDef]:
    """The views, each table re-tested against a scalar subquery's aggregate pre-aggregated (with a note)."""

    def rewrite(select: exp.Select, taken: set[str]) -> list[str]:
        table = _retested_table(select, columns)
        if table is None:
            return []
        written = table.sql("spark")
        try:
            return [f"the rows of {written} are {_rewrite(select, table, taken, columns, source_types)}"]
        except _Stays as why:
            return [f"the rows of {written} are joined one by one: {why}"]

    return rewrite_selects(views, rewrite)


class _Stays(Exception):
    """Why a table is joined row by row as written."""


def _scalar_aliases(select: exp.Select) -> set[str]:
    """The aliases of the joins project/scalar_subqueries.py made of scalar subqueries (per key, or one row:
    a moved global aggregate tests every row again)."""
    return {
        j.this.alias.lower()
        for j in select.args.get("joins") or []
        if isinstance(j.this, exp.Subquery) and j.this.meta.get("scalar")
    }


def _retested_table(select: exp.Select, columns: Columns) -> exp.Table | None:
    """The FROM table whose column a WHERE conjunct compares with a scalar subquery's aggregate."""
    scalars = _scalar_aliases(select)
    where = select.args.get("where")
    if not scalars or where is None or not (select.args.get("group") or _aggregates_of(select)):
        return None
    tables = tables_of(select)
    mine = relations(select, columns) or {}
    for conjunct in conjuncts(where.this):
        read = {owner(c, mine) for c in conjunct.find_all(exp.Column)}
        if read & scalars:
            for alias in sorted(a for a in read - scalars if a in tables):
                return tables[alias]
    return None


def _aggregates_of(select: exp.Select) -> list[exp.AggFunc]:
    """The aggregates of `select` itself (not of its subqueries), none inside another one."""
    return [
        a
        for a in select.find_all(exp.AggFunc)
        if a.find_ancestor(exp.Select) is select and a.find_ancestor(exp.AggFunc) is None
    ]


def _rewrite(
    select: exp.Select, table: exp.Table, taken: set[str], columns: Columns, source_types: SourceTypes
) -> str:
    """Make `table` an aggregate by the columns `select` reads; what it became, in words (or raises _Stays, with
    `select` as it was)."""
    alias = table.alias_or_name.lower()
    known = None if table.db or table.name.lower() in visible_ctes(select) else source_types(table.name)
    if known is None:
        raise _Stays(
            f"{table.name} is not a source, so the types of its columns are not known before planning"
        )
    types, key = known
    mine = relations(select, columns)
    if mine is None or any(cols is None for cols in mine.values()):
        raise _Stays("the columns of a table the query reads are not known before planning (a SELECT *)")
    if select.args.get("distinct") or any(True for _ in select.find_all(exp.Window)):
        raise _Stays("the query has DISTINCT or a window function")
    for join in select.args.get("joins") or []:
        side, kind = (join.args.get("side") or "").upper(), (join.args.get("kind") or "").upper()
        if side in ("RIGHT", "FULL") or kind in ("SEMI", "ANTI") or (side and join.this is table):
            raise _Stays(f"the query has {side or kind} JOIN {join.this.sql('spark')}, not inner joins alone")
    for arg in ("expressions", "where", "group", "having", "order"):
        if any(isinstance(n, (exp.Subquery, exp.Exists)) for n in _walk(select.args.get(arg))):
            raise _Stays("the query holds a subquery outside FROM")
    own = [c for c in select.find_all(exp.Column) if c.find_ancestor(exp.Select) is select]
    for c in own:
        if owner(c, mine) is None:
            raise _Stays(f"the column {c.sql('spark')} is not known to be of one table only")

    def of_table(c: exp.Column) -> bool:
        return owner(c, mine) == alias

    composed: list[tuple[exp.AggFunc, Callable[[exp.Expr], exp.Expr]]] = []
    for aggregate in _aggregates_of(select):
        read = list(aggregate.find_all(exp.Column))
        if isinstance(aggregate, (exp.Min, exp.Max)) and not any(of_table(c) for c in read):
            continue  # MIN or MAX of other tables' columns: the same over one row per group
        if aggregate.args.get("distinct") or isinstance(aggregate.this, exp.Distinct):
            raise _Stays(f"{aggregate.sql('spark')} is over distinct values")
        if isinstance(aggregate.parent, exp.Filter):
            raise _Stays(f"{aggregate.sql('spark')} has a FILTER")
        if not all(of_table(c) for c in read):
            raise _Stays(f"{aggregate.sql('spark')} reads columns of other tables than {table.name}")
        composed.append((aggregate, _composed(aggregate, types)))

    # The WHERE's conjuncts over the table alone filter its rows before they are grouped.
    where = select.args.get("where")
    moved: list[exp.Expr] = []
    kept: list[exp.Expr] = []
    for conjunct in conjuncts(where.this) if where is not None else []:
        found = list(conjunct.find_all(exp.Column))
        alone = bool(found) and all(of_table(c) for c in found) and not any(conjunct.find_all(exp.AggFunc))
        (moved if alone else kept).append(conjunct)
    aggregated = {id(a) for a, _ in composed}
    skipped = {id(c) for m in moved for c in m.find_all(exp.Column)}
    group_by = sorted(
        {
            c.name.lower()
            for c in own
            if of_table(c) and id(c) not in skipped and id(c.find_ancestor(exp.AggFunc)) not in aggregated
        }
    )
    if key and {k.lower() for k in key} <= set(group_by):
        raise _Stays(f"the query reads its key ({', '.join(key)}), so grouping would keep one row per row")

    eager = fresh_alias("eager", taken)
    names = iter(f"agg_{n}" for n in range(1, 10_000) if f"agg_{n}" not in types)
    partials: dict[str, str] = {}  # an aggregate's SQL → its column of the eager view
    for aggregate, _ in composed:
        if not _counts_rows(aggregate) and aggregate.sql("spark") not in partials:
            partials[aggregate.sql("spark")] = next(names)
    rows = next(names)  # COUNT(*): a group's rows
    body = exp.select(
        *(exp.alias_(exp.column(c, alias), c) for c in group_by),
        *(exp.alias_(a.copy(), partials[a.sql("spark")]) for a, _ in composed if not _counts_rows(a)),
        exp.alias_(exp.Count(this=exp.Star()), rows),
    ).from_(table.copy())
    body.set("expressions", list({e.alias: e for e in body.expressions}.values()))  # each partial once
    if moved:
        body = body.where(exp.and_(*(c.copy() for c in moved)))
    if group_by:
        body = body.group_by(*(exp.column(c, alias) for c in group_by))

    for aggregate, compose in composed:
        name = rows if _counts_rows(aggregate) else partials[aggregate.sql("spark")]
        aggregate.replace(compose(exp.column(name, eager)))
    for c in own:
        if c.table.lower() == alias:
            c.set("table", exp.to_identifier(eager))
    select.set("where", exp.Where(this=exp.and_(*kept)) if kept else None)
    table.replace(exp.Subquery(this=body, alias=exp.TableAlias(this=exp.to_identifier(eager))))
    by = ", ".join(f"{alias}.{c}" for c in group_by) or "nothing (one row)"
    return (
        f"aggregated by {by} before the join: {eager}, a view of its own, so that a moved aggregate of a "
        "scalar subquery tests its groups again, not each row"
    )


def _walk(node: exp.Expr | list[exp.Expr] | None) -> Iterator[exp.Expr]:
    """The nodes under an argument of a SELECT (a list of expressions, one, or none)."""
    for item in node if isinstance(node, list) else [node] if node is not None else []:
        yield from item.walk()


def _counts_rows(aggregate: exp.AggFunc) -> bool:
    return isinstance(aggregate, exp.Count) and isinstance(aggregate.this, exp.Star)


def _composed(aggregate: exp.AggFunc, types: dict[str, exp.DataType]) -> Callable[[exp.Expr], exp.Expr]:
    """How the query's aggregate is made of its partial, a column of the eager view (raises _Stays)."""
    if isinstance(aggregate, exp.Count):
        return lambda part: exp.func("COALESCE", exp.Sum(this=part), exp.Literal.number(0))
    if isinstance(aggregate, (exp.Min, exp.Max)):
        return lambda part: type(aggregate)(this=part)
    if not isinstance(aggregate, exp.Sum):
        raise _Stays(f"{aggregate.sql('spark')} is not a SUM, COUNT, MIN or MAX (which compose from parts)")
    argument = aggregate.this.copy()
    for c in argument.find_all(exp.Column):
        c.type = types.get(c.name.lower())
    found = infer_type(argument)
    if found.this in _INTEGRAL:
        return lambda part: exp.Sum(this=part)
    summed = aggregate_type(aggregate, found)
    if found.this != Type.DECIMAL or summed is None:
        raise _Stays(
            f"{aggregate.sql('spark')} sums a {found.sql('spark')}, whose rounding depends on the order"
        )
    return lambda part: exp.Cast(this=exp.Sum(this=part), to=summed.copy())
