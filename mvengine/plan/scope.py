"""Scopes and names: the relations a SELECT sees, by alias, and how a name in it resolves (as Spark resolves it:
case-insensitively, innermost scope first, USING columns merged), to a bound column of a plan node's field."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

from sqlglot import exp

from mvengine.errors import SqlError
from mvengine.names import did_you_mean
from mvengine.plan.nodes import Field, Node


@dataclass(frozen=True)
class Relation:
    """A source or view, as a name in FROM sees it."""

    name: str
    kind: str  # "source" or "view"
    fields: tuple[Field, ...]
    key: tuple[int, ...] | None
    append_only: bool
    kept: exp.Expression | None = None  # the rows readers see (a source's DROP ROW/QUARANTINE expectations)


@dataclass
class Scope:
    """The relations visible in one SELECT, by alias; `outer` for correlated subqueries."""

    relations: list[tuple[str, Node]] = field(default_factory=list)
    using: dict[str, exp.Expression] = field(default_factory=dict)  # USING column (lower-case) → merged value
    outer: Scope | None = None

    def find(self, alias: str) -> Node | None:
        return next((node for a, node in self.relations if a.lower() == alias.lower()), None)

    def columns(self) -> list[str]:
        return [f.name for _, node in self.relations for f in node.fields]


def resolve(
    name: str, table: str | None, scope: Scope, at: exp.Expression, error: Callable[..., SqlError]
) -> exp.Expression:
    """The bound column (or merged USING value) that `table.name` names in `scope` or an outer one (marked
    `outer` with its depth); `error(message, at, hint=...)` makes the SqlError of an unknown or ambiguous name."""
    depth = 0
    current: Scope | None = scope
    while current is not None:
        if table is None and name.lower() in current.using:
            return mark_outer(current.using[name.lower()].copy(), depth)
        if table is not None:
            node = current.find(table)
            if node is not None:
                f = field_named(node, name)
                if f is None:
                    raise error(
                        f"unknown column {table}.{name}",
                        at,
                        hint=did_you_mean(name, [x.name for x in node.fields], f"the columns of {table}"),
                    )
                return bound_column(f, depth)
        else:
            hits = [
                (alias, f) for alias, node in current.relations if (f := field_named(node, name)) is not None
            ]
            if len(hits) > 1:
                where = " and ".join(alias for alias, _ in hits)
                raise error(
                    f"column {name!r} is ambiguous: it is a column of {where}",
                    at,
                    hint="qualify it: " + " or ".join(f"{a}.{name}" for a, _ in hits),
                )
            if hits:
                return bound_column(hits[0][1], depth)
        current = current.outer
        depth += 1
    if table is not None:
        aliases = [a for s in scopes(scope) for a, _ in s.relations]
        raise error(
            f"unknown table alias {table!r} in {table}.{name}",
            at,
            hint=did_you_mean(table, aliases, "the tables in FROM"),
        )
    raise error(f"unknown column {name!r}", at, hint=did_you_mean(name, scope.columns(), "columns"))


def bound_column(f: Field, depth: int) -> exp.Column:
    column = f.ref()
    column.meta["bound"] = True
    column.meta["time_attr"] = f.time_attr
    column.meta["window_bound"] = f.window_bound
    if depth:
        column.meta["outer"] = depth
    return column


def mark_outer(e: exp.Expression, depth: int) -> exp.Expression:
    for column in e.find_all(exp.Column):
        column.meta["bound"] = True
        if depth:
            column.meta["outer"] = depth
    return e


def nullable(node: Node) -> Node:
    return replace(node, fields=tuple(replace(f, nullable=True) for f in node.fields))


def field_named(node: Node, name: str) -> Field | None:
    return next((f for f in node.fields if f.name.lower() == name.lower()), None)


def scope_fields(scope: Scope) -> tuple[Field, ...]:
    return tuple(f for _, node in scope.relations for f in node.fields)


def scopes(scope: Scope | None) -> Iterator[Scope]:
    while scope is not None:
        yield scope
        scope = scope.outer
