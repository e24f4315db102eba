"""`mv query`'s SQL: every source or view it names is pinned to one version, chosen by the table's own time-travel
clause (`VERSION AS OF n`, `TIMESTAMP AS OF t`, `FOR SYSTEM_TIME AS OF t`), else by the query's default: a
trailing `AS OF SYSTEM TIME t` (seed 002), or a cut of source versions (`--as-of-source`), else the latest.

The query is rewritten to read one temporary view per (table, version), aliased back to the name the query
used, so column references qualified by the table's name keep working and one query can join a view with
itself at two points in time.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from mvengine.errors import MvError
from mvengine.names import did_you_mean
from mvengine.project.catalog_tables import catalog_name
from mvengine.reading.versions import Versions
from mvengine.sql.files import parse_error_text, snippet

# `... AS OF SYSTEM TIME '12:03'` at the very end of the query (optionally `TIMESTAMP '...'`).
TRAILING_AS_OF = re.compile(
    r"\s+AS\s+OF\s+SYSTEM\s+TIME\s+(?:TIMESTAMP\s+)?'([^']*)'\s*;?\s*$", re.IGNORECASE
)


@dataclass(frozen=True)
class TableRead:
    name: str  # the source or view, as declared
    version: int
    temp_view: str  # what the rewritten query reads


@dataclass(frozen=True)
class PinnedQuery:
    sql: str  # Spark SQL over the temporary views of `reads`
    reads: tuple[TableRead, ...]


def pin_versions(
    sql: str,
    versions: Versions,
    *,
    as_of_source: dict[str, int] | None = None,
    evaluate: Callable[[str], datetime],
) -> PinnedQuery:
    """Resolve every table of `sql` to a version; `evaluate` computes a timestamp expression that is not a
    plain literal (e.g. `current_timestamp() - INTERVAL 1 HOUR`) with Spark."""
    default_time = None
    trailing = TRAILING_AS_OF.search(sql)
    if trailing:
        default_time, sql = trailing.group(1), sql[: trailing.start()]
        if as_of_source:
            raise MvError(
                "the query ends with AS OF SYSTEM TIME and --as-of-source is given too: they both say "
                "which versions to read by default",
                hint="keep one of them",
            )
    tree = _parse(sql)
    cte_names = {cte.alias.lower() for cte in tree.find_all(exp.CTE)}
    reads: dict[tuple[str, int], TableRead] = {}
    for table in list(tree.find_all(exp.Table)):
        if not isinstance(table.this, exp.Identifier) or (
            not table.args.get("db") and table.name.lower() in cte_names
        ):
            continue
        name = _declared(table, versions)
        if name is None:
            continue  # a table of Spark's catalog, read as Spark's catalog has it
        clause = table.args.get("version")
        if clause is not None:
            version = _clause_version(clause, name, versions, evaluate)
        elif default_time is not None:
            version = versions.version_at(name, default_time)
        elif as_of_source:
            version = versions.as_of_sources(name, as_of_source)
        else:
            version = versions.latest(name)
        read = reads.setdefault((name, version), TableRead(name, version, f"__mv_{name}_v{version}"))
        alias = table.alias or (table.name if table.args.get("db") else name)
        table.replace(
            exp.Table(
                this=exp.to_identifier(read.temp_view), alias=exp.TableAlias(this=exp.to_identifier(alias))
            )
        )
    return PinnedQuery(tree.sql("spark"), tuple(reads.values()))


def _parse(sql: str) -> exp.Expr:
    try:
        trees = [t for t in sqlglot.parse(sql, read="spark") if t is not None]
    except ParseError as e:
        raise _syntax_error(sql, e) from None
    if len(trees) != 1 or not isinstance(trees[0], exp.Query):
        raise MvError(
            "mv query runs one SELECT query (WITH, UNION and VALUES included), nothing else",
            hint="views are declared in views/*.sql; sources change through their own writers",
        )
    return trees[0]


QUERY_STARTS = ("SELECT", "WITH", "VALUES", "TABLE", "FROM", "(")


def _syntax_error(sql: str, e: ParseError) -> MvError:
    """A located syntax error: the line and column, the line itself with a caret, and what is wrong there in
    SQL words (a misspelled first word is named as such: sqlglot would read `SELEC * FROM t` as a product)."""
    words = sql.split(None, 1)
    first = words[0].upper() if words else ""
    if first and not first.startswith(QUERY_STARTS):
        close = did_you_mean(first, ["SELECT", "WITH", "VALUES"], "")
        return MvError(
            f"the query starts with {words[0]!r}: a query starts with SELECT, WITH or VALUES"
            + (f" ({close})" if close.startswith("did you mean") else ""),
            hint="mv query takes one Spark SQL SELECT statement, in quotes",
        )
    detail = e.errors[0] if e.errors else {}
    line, col = detail.get("line"), detail.get("col")
    where = f" at line {line}, column {col}" if line else ""
    text = parse_error_text(str(detail.get("description") or e))
    shown = snippet(sql, int(line), int(col) if col else None) if line else ""
    return MvError(
        f"the query is not valid SQL{where}: {text}" + (f"\n{shown}" if shown else ""),
        hint="mv query takes one Spark SQL SELECT statement, in quotes",
    )


def _declared(table: exp.Table, versions: Versions) -> str | None:
    """The source or view `table` names: by its name, by the catalog table a source reads
    (`sales.orders`), or by the name the view is registered under (`mv.totals`); None for another table of
    Spark's catalog."""
    wanted = catalog_name(table)
    if wanted is not None:
        catalog = versions.catalog
        read = next((s.name for s in catalog.sources.values() if s.catalog_table == wanted), None)
        schema, _, view = wanted.rpartition(".")
        hit = catalog.find(view)
        registered = hit in catalog.plans and schema == versions.config.catalog_schema.lower()
        return read or (hit if registered else None)
    hit = versions.catalog.find(table.name)
    if hit is None:
        raise MvError(
            f"the query reads {table.name!r}, which is no source or view of this project",
            hint=did_you_mean(table.name, list(versions.catalog.graph.nodes), "sources and views"),
        )
    return hit


def _clause_version(
    clause: exp.Expression, name: str, versions: Versions, evaluate: Callable[[str], datetime]
) -> int:
    value = clause.expression
    if str(clause.this).upper() == "VERSION":
        if not (isinstance(value, exp.Literal) and not value.is_string and value.this.isdigit()):
            raise MvError(
                f"VERSION AS OF for {name} needs a whole number, not {value.sql('spark')}",
                hint=f"e.g. FROM {name} VERSION AS OF 3; versions are listed by mv history {name}"
                if versions.is_view(name)
                else f"e.g. FROM {name} VERSION AS OF 3",
            )
        return versions.check_version(name, int(value.this))
    if isinstance(value, exp.Cast) and isinstance(value.this, exp.Literal) and value.this.is_string:
        value = value.this
    when = value.this if isinstance(value, exp.Literal) and value.is_string else evaluate(value.sql("spark"))
    return versions.version_at(name, when)
