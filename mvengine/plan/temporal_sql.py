"""A temporal join (`JOIN dim FOR SYSTEM_TIME AS OF f.ts AS d ON ...`) spelled as SQL Spark runs.

Spark reads a table as of a constant time only. The join is spelled as what it means: each version row of the
dimension dated valid until the next version time of its key (`_mv_valid_to`, by LEAD over the distinct version
times), joined where the fact's time lies in that range. The SELECT around the join leaves that column out of
its stars (`* EXCEPT`). This is the query a full recomputation runs, and the one the tests' oracle runs.

A lookup join (`FOR SYSTEM_TIME AS OF` a PROCTIME() column) is spelled as the plain join: a recomputation's
processing time is its own (PROCTIME() is the recomputation's time), so every row meets the dimension as it is.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlglot
from sqlglot import exp

VALID_TO = "_mv_valid_to"


@dataclass(frozen=True)
class AsOf:
    """A temporal join as the binder found it: the dimension's key expressions (the right sides of ON's
    equalities) and version column, as Spark SQL over the dimension's alias (None: a lookup join's)."""

    keys: tuple[str, ...]
    version: str | None


def spell_temporal_joins(query: exp.Expr, joins: dict[str, AsOf]) -> exp.Expr:
    """`query` with each temporal join of `joins` (by its table's SQL) spelled as a join Spark runs."""
    if not joins:
        return query
    query = query.copy()
    for join in list(query.find_all(exp.Join)):
        table = join.this
        if not isinstance(table, exp.Table) or table.sql("spark") not in joins:
            continue
        spec = joins[table.sql("spark")]
        if spec.version is None:
            table.set("version", None)
            continue
        version: exp.Version = table.args["version"]
        alias = table.alias_or_name
        dim = table.copy()
        dim.set("version", None)
        dim.set("alias", None)
        versions = _versions(dim.sql("spark"), exp.to_identifier(alias).sql("spark"), spec)
        join.set("this", exp.Subquery(this=versions, alias=exp.TableAlias(this=exp.to_identifier(alias))))
        valid_to = exp.column(VALID_TO, table=alias)
        at = version.expression.copy()
        valid = sqlglot.parse_one(
            f"{spec.version} <= {at.sql('spark')} AND ({at.sql('spark')} < {valid_to.sql('spark')} "
            f"OR {valid_to.sql('spark')} IS NULL)",
            read="spark",
        )
        on = join.args.get("on")
        join.set("on", valid if on is None else exp.and_(on, valid))
        select = join.parent
        if isinstance(select, exp.Select):
            select.set("expressions", [_without_valid_to(e, alias) for e in select.expressions])
    return query


def _versions(dim: str, alias: str, spec: AsOf) -> exp.Expr:
    """The dimension's rows, each with the time its version stops being valid (NULL: the latest)."""
    keys = [f"{k} AS _mv_k{i}" for i, k in enumerate(spec.keys)]
    names = [f"_mv_k{i}" for i in range(len(spec.keys))]
    times = (
        f"SELECT DISTINCT {', '.join(keys)}, {spec.version} AS _mv_t FROM {dim} AS {alias} "
        f"WHERE {spec.version} IS NOT NULL"
    )
    ends = (
        f"SELECT {', '.join(names)}, _mv_t, LEAD(_mv_t) OVER (PARTITION BY {', '.join(names)} ORDER BY _mv_t) "
        f"AS {VALID_TO} FROM ({times})"
    )
    same = " AND ".join(
        [*(f"{k} <=> _mv_v.{n}" for k, n in zip(spec.keys, names)), f"{spec.version} = _mv_v._mv_t"]
    )
    return sqlglot.parse_one(
        f"SELECT {alias}.*, _mv_v.{VALID_TO} FROM {dim} AS {alias} JOIN ({ends}) AS _mv_v ON {same}",
        read="spark",
    )


def _without_valid_to(e: exp.Expression, alias: str) -> exp.Expression:
    """A SELECT item: a star that would include the dimension's `_mv_valid_to` with it left out."""
    if isinstance(e, exp.Star):
        return exp.Star(except_=[*(e.args.get("except_") or []), exp.column(VALID_TO, table=alias)])
    if isinstance(e, exp.Column) and isinstance(e.this, exp.Star) and e.table.lower() == alias.lower():
        star = exp.Star(except_=[*(e.this.args.get("except_") or []), exp.column(VALID_TO)])
        return exp.Column(this=star, table=exp.to_identifier(e.table))
    return e
