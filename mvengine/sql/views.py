"""Materialized views declared in SQL (DESIGN.md §3):

CREATE MATERIALIZED VIEW team_totals [(team, total)] [WITH ('path' = '...')] AS
SELECT team, SUM(score) AS total FROM user_scores GROUP BY team;
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from mvengine.config import Config, join_uri
from mvengine.errors import InvalidNameError, SqlError
from mvengine.names import validate_name
from mvengine.sql.expectations import Expectation
from mvengine.sql.files import Statement
from mvengine.sql.time_syntax import Emit, option_micros

# A view's WITH options, with their meaning (docs/reference/sql.md is made from it).
VIEW_OPTIONS = {
    "path": "where the view's tables live (snapshot/, changelog/, _state/): a folder inside the project, an "
    "absolute path or a URI; default <warehouse>/<view>",
    "refresh_policy": "auto (default: the delta rule, or a recomputation when a batch changes much of the "
    "inputs), incremental (the delta rule in every batch), incremental_strict (a view without a delta rule is "
    "an error), full (recomputed in every batch where an input moved)",
    "allowed_lateness": "on a windowed or session-window view, or window functions ordered by event time (an "
    "interval such as '1 hour'): an input row more than this behind the watermark is not applied but written "
    "to <view>/late, and windows and sessions that ended this long before the watermark leave the view's state "
    "(bounded), as do the rows of window functions that read n rows back once n rows after them are",
    "state_ttl": "a group, distinct row or partition untouched by the input for this long (batch clock, an "
    "interval such as '7 days') leaves the view with its state",
    "target_lag": "how fresh `mv refresh --continuous` keeps the view: an interval such as '5 minutes' (its "
    "batch waits until the oldest input commit it does not reflect is about that old), or 'downstream' (it is "
    "refreshed only when a view that reads it is); default: in every batch",
}
DOWNSTREAM = "downstream"  # WITH ('target_lag' = 'downstream')
# How a view is refreshed (as Databricks' materialized views offer): `auto` chooses per batch, by cost, between
# its delta rule and a recomputation; `incremental` always applies the delta rule when the view has one;
# `incremental_strict` makes a view without one an error at plan time; `full` always recomputes.
REFRESH_POLICIES = ("auto", "incremental", "incremental_strict", "full")


@dataclass(frozen=True)
class ViewDef:
    name: str
    file: str
    line: int
    query: exp.Query
    column_names: tuple[str, ...] | None  # the optional (col, ...) list after the name
    path: str  # the folder holding snapshot/, changelog/ and _state/
    text: str  # the statement as written, to notice when a view's SQL changes
    refresh_policy: str = "auto"  # one of REFRESH_POLICIES
    emit: Emit | None = None  # the EMIT clause after the SELECT (seed 002); None: every batch's changes
    allowed_lateness: int | None = None  # µs: rows later than this behind the watermark are not applied
    state_ttl: int | None = None  # µs of batch clock: a key untouched that long leaves the view and its state
    # µs: how stale --continuous lets the view get (runtime/target_lag.py); DOWNSTREAM: as its readers need it
    target_lag: int | str | None = None
    origin: str | None = None  # a join input made a view of its own (project/join_inputs.py): whose, in words
    rewrites: tuple[str, ...] = ()  # what the project's rewrites did to its query, in words (for mv plan)
    expectations: tuple[
        Expectation, ...
    ] = ()  # CONSTRAINT ... EXPECT, checked against its columns when planned


def is_view(statement: Statement) -> bool:
    tree = statement.tree
    return (
        isinstance(tree, exp.Create)
        and tree.kind == "VIEW"
        and any(isinstance(p, exp.MaterializedProperty) for p in _properties(tree))
    )


def parse_view(statement: Statement, config: Config) -> ViewDef:
    tree = statement.tree
    assert isinstance(tree, exp.Create)
    target = tree.this
    table = target.this if isinstance(target, exp.Schema) else target
    name = table.name
    where: dict[str, Any] = {"file": statement.file, "line": statement.line, "obj": f"view {name}"}
    if table.args.get("db") or table.args.get("catalog"):
        raise SqlError(
            f"a view name cannot have a database or catalog prefix ({table.sql('spark')})",
            **where,
            hint=f"write CREATE MATERIALIZED VIEW {name} ...: views live in the project's warehouse",
        )
    try:
        validate_name(name, "view name")
    except InvalidNameError as e:
        raise SqlError(e.message, **where, hint=e.hint) from None
    column_names = None
    if isinstance(target, exp.Schema):
        column_names = tuple(c.name for c in target.expressions)
    query = tree.expression
    if not isinstance(query, exp.Query):
        raise SqlError("a materialized view needs AS SELECT ...", **where)
    options: dict[str, str] = {}
    for p in _properties(tree):
        if isinstance(p, exp.MaterializedProperty):
            continue
        if not isinstance(p, exp.Property) or not isinstance(p.args.get("value"), exp.Literal):
            raise SqlError(
                f"unsupported view property {p.sql('spark')}",
                **where,
                hint="write options as WITH ('path' = '...')",
            )
        options[p.name.lower()] = p.args["value"].name
    unknown = options.keys() - VIEW_OPTIONS.keys()
    if unknown:
        raise SqlError(
            f"unknown WITH option(s) {sorted(unknown)}",
            **where,
            hint=f"known options: {', '.join(sorted(VIEW_OPTIONS))}",
        )
    path = (
        config.table_path(options["path"], where) if "path" in options else join_uri(config.warehouse, name)
    )
    policy = options.get("refresh_policy", "auto").lower()
    if policy not in REFRESH_POLICIES:
        raise SqlError(
            f"unknown refresh_policy {options['refresh_policy']!r}",
            **where,
            hint=f"write WITH ('refresh_policy' = one of {', '.join(REFRESH_POLICIES)})",
        )
    lateness = (
        option_micros("allowed_lateness", options["allowed_lateness"], where)
        if "allowed_lateness" in options
        else None
    )
    ttl = option_micros("state_ttl", options["state_ttl"], where) if "state_ttl" in options else None
    if ttl == 0:
        raise SqlError(
            "state_ttl must be longer than nothing", **where, hint="write WITH ('state_ttl' = '7 days'), say"
        )
    return ViewDef(
        name,
        statement.file,
        statement.line,
        query,
        column_names,
        path,
        statement.text,
        policy,
        statement.emit,
        lateness,
        ttl,
        _target_lag(options, where),
        expectations=statement.expectations,
    )


def _target_lag(options: dict[str, str], where: dict[str, Any]) -> int | str | None:
    if "target_lag" not in options:
        return None
    if options["target_lag"].strip().lower() == DOWNSTREAM:
        return DOWNSTREAM
    lag = option_micros("target_lag", options["target_lag"], where)
    if lag == 0:
        raise SqlError(
            "target_lag must be longer than nothing (a view without one is refreshed in every batch)",
            **where,
            hint="write WITH ('target_lag' = '5 minutes'), or 'downstream'",
        )
    return lag


def _properties(tree: exp.Create) -> list[exp.Expression]:
    props = tree.args.get("properties")
    return list(props.expressions) if props else []
