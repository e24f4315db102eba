"""mvengine's logical operators: what a view computes, as a small tree the incremental compiler walks.

Expressions inside nodes are sqlglot trees whose columns are bound: every column is `qualifier.name` of a field
of the node's input (quoted), and carries its type. Each node knows its output fields, its unique key when one can
be derived (as positions into its fields; () means "at most one row"), and which fields are event-time attributes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from sqlglot import exp

if TYPE_CHECKING:
    from mvengine.plan.windows import WindowSpec


@dataclass(frozen=True)
class Field:
    name: str
    type: exp.DataType
    nullable: bool
    qualifier: str | None = None  # the FROM alias the field is visible under, inside a SELECT
    time_attr: bool = False  # an event-time (rowtime) attribute: a WATERMARK column carried through unchanged
    # "start" or "end" of a fixed-size (tumbling, hopping) event-time window, "session start" or "session end" of a
    # session window: carried through unchanged
    window_bound: str | None = None

    def ref(self) -> exp.Column:
        """A bound column reference to this field."""
        column = exp.column(self.name, table=self.qualifier, quoted=True)
        column.type = self.type.copy()
        column.meta["nullable"] = self.nullable
        column.meta["time_attr"] = self.time_attr
        column.meta["window_bound"] = self.window_bound
        return column


Key = tuple[int, ...]


@dataclass(frozen=True, eq=False)
class Node:
    fields: tuple[Field, ...]

    @property
    def children(self) -> tuple[Node, ...]:
        return ()

    @property
    def key(self) -> Key | None:
        return None

    def expressions(self) -> list[exp.Expression]:
        """The bound expressions this node evaluates (for analysis: functions, subqueries, windows)."""
        return []

    def describe(self) -> str:
        return type(self).__name__

    def walk(self) -> Iterator[Node]:
        yield self
        for child in self.children:
            yield from child.walk()


@dataclass(frozen=True, eq=False)
class Unary(Node):
    """A node over one input; by default it keeps its input's key."""

    child: Node = None  # type: ignore[assignment]

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.child,)

    @property
    def key(self) -> Key | None:
        return self.child.key


@dataclass(frozen=True, eq=False)
class Scan(Node):
    """Reads a source or a view."""

    input: str = ""
    input_kind: str = "source"  # "source" or "view"
    input_key: Key | None = None
    append_only: bool = False

    @property
    def key(self) -> Key | None:
        return self.input_key

    def describe(self) -> str:
        return f"Scan {self.input} ({self.input_kind})"


@dataclass(frozen=True, eq=False)
class Filter(Unary):
    predicate: exp.Expression = None  # type: ignore[assignment]

    def expressions(self) -> list[exp.Expression]:
        return [self.predicate]

    def describe(self) -> str:
        return f"Filter {show(self.predicate, self.child.fields)}"


@dataclass(frozen=True, eq=False)
class Project(Unary):
    projections: tuple[exp.Expression, ...] = ()  # one per field

    @property
    def key(self) -> Key | None:
        """The child's key, when every key column is passed through as a plain column reference; of a fixed-size
        window's start and end, one is enough (either gives the other)."""
        if self.child.key is None:
            return None
        positions = []
        bounds = {self.child.fields[k].window_bound for k in self.child.key} & {"start", "end"}
        for k in self.child.key:
            source = self.child.fields[k]
            hit = next((i for i, e in enumerate(self.projections) if _is_ref_to(e, source)), None)
            if hit is None and bounds == {"start", "end"} and source.window_bound in bounds:
                other = next(
                    self.child.fields[j]
                    for j in self.child.key
                    if self.child.fields[j].window_bound in bounds - {source.window_bound}
                )
                if any(_is_ref_to(e, other) for e in self.projections):
                    continue
            if hit is None:
                return None
            positions.append(hit)
        return tuple(positions)

    def expressions(self) -> list[exp.Expression]:
        return list(self.projections)

    def describe(self) -> str:
        shown = ", ".join(
            _render(e, f.name, self.child.fields) for e, f in zip(self.projections, self.fields)
        )
        return f"Project {shown}"


@dataclass(frozen=True, eq=False)
class Join(Node):
    """An equi-join (`equi` pairs of left and right expressions) with an optional residual condition.

    kind: inner, left, right, full, cross, semi, anti. Semi and anti joins output the left fields only.
    """

    left: Node = None  # type: ignore[assignment]
    right: Node = None  # type: ignore[assignment]
    kind: str = "inner"
    equi: tuple[tuple[exp.Expression, exp.Expression], ...] = ()
    residual: exp.Expression | None = None
    null_aware: bool = False  # NOT IN (subquery): no row at all when the subquery yields a NULL

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.left, self.right)

    @property
    def key(self) -> Key | None:
        left, right = self.left.key, self.right.key
        if self.kind in ("semi", "anti"):
            return left
        offset = len(self.left.fields)
        right_shifted = None if right is None else tuple(k + offset for k in right)
        # A side whose key is fully matched by equalities joins at most one row to each row of the other side.
        if (
            self.kind in ("inner", "left")
            and right is not None
            and left is not None
            and self._covers(right, 1)
        ):
            return left
        if (
            self.kind in ("inner", "right")
            and left is not None
            and right is not None
            and self._covers(left, 0)
        ):
            return right_shifted
        if left is not None and right_shifted is not None:
            return left + right_shifted
        return None

    def _covers(self, key: Key, side: int) -> bool:
        node = self.right if side else self.left
        equated = [pair[side] for pair in self.equi]
        return all(any(_is_ref_to(e, node.fields[k]) for e in equated) for k in key)

    def expressions(self) -> list[exp.Expression]:
        return [e for pair in self.equi for e in pair] + (
            [self.residual] if self.residual is not None else []
        )

    def conditions(self) -> tuple[list[exp.Expression], list[exp.Expression], list[exp.Expression]]:
        """The parts of the residual condition that read the left side only, the right side only, and both."""
        left = {(f.qualifier, f.name) for f in self.left.fields}
        right = {(f.qualifier, f.name) for f in self.right.fields}
        parts: tuple[list[exp.Expression], list[exp.Expression], list[exp.Expression]] = ([], [], [])
        for conjunct in conjuncts(self.residual) if self.residual is not None else []:
            refs = {(c.table or None, c.name) for c in conjunct.find_all(exp.Column)}
            parts[0 if refs <= left else 1 if refs <= right else 2].append(conjunct)
        return parts

    def describe(self) -> str:
        inputs = self.left.fields + self.right.fields
        on = " AND ".join(f"{show(a, inputs)} = {show(b, inputs)}" for a, b in self.equi)
        if self.residual is not None:
            on = f"{on} AND {show(self.residual, inputs)}" if on else show(self.residual, inputs)
        kind = "null-aware anti" if self.null_aware else self.kind
        return f"Join {kind}" + (f" ON {on}" if on else "")


@dataclass(frozen=True, eq=False)
class TemporalJoin(Join):
    """`JOIN dim FOR SYSTEM_TIME AS OF left_time ... ON equalities` (inner or left): each left row joins, of the
    right rows its keys equal, those of the latest `version` (the right side's event-time column) at or before
    its `as_of` time (bound over the left fields), the version valid at that time."""

    as_of: exp.Expression = None  # type: ignore[assignment]
    version: exp.Expression = None  # type: ignore[assignment]

    def expressions(self) -> list[exp.Expression]:
        return [*super().expressions(), self.as_of, self.version]

    def describe(self) -> str:
        inputs = self.left.fields + self.right.fields
        as_of = (
            f" FOR SYSTEM_TIME AS OF {show(self.as_of, inputs)} (versions by {show(self.version, inputs)})"
        )
        return super().describe().replace("Join", "TemporalJoin", 1).replace(" ON ", f"{as_of} ON ", 1)


@dataclass(frozen=True, eq=False)
class LookupJoin(Join):
    """`JOIN dim FOR SYSTEM_TIME AS OF left_proctime ... ON equalities` (inner or left), where the time is the left
    side's PROCTIME(): each left row joins the right rows its keys equal as the right side is when the row
    arrives, i.e. at the input versions of the batch that brings it (Flink's lookup join); never revised."""

    as_of: exp.Expression = None  # type: ignore[assignment]

    def expressions(self) -> list[exp.Expression]:
        return [*super().expressions(), self.as_of]

    def describe(self) -> str:
        as_of = (
            f" FOR SYSTEM_TIME AS OF {show(self.as_of, self.left.fields)} (the dimension as of each batch)"
        )
        return super().describe().replace("Join", "LookupJoin", 1).replace(" ON ", f"{as_of} ON ", 1)


@dataclass(frozen=True, eq=False)
class Aggregate(Unary):
    """GROUP BY `groups` computing `aggregates`; fields are the groups, then the aggregates."""

    groups: tuple[exp.Expression, ...] = ()
    aggregates: tuple[exp.Expression, ...] = ()  # AggFunc calls, possibly wrapped in FILTER (WHERE ...)

    @property
    def key(self) -> Key | None:
        return tuple(range(len(self.groups)))

    def expressions(self) -> list[exp.Expression]:
        return [*self.groups, *self.aggregates]

    def describe(self) -> str:
        groups = ", ".join(show(e, self.child.fields) for e in self.groups) or "()"
        aggs = ", ".join(show(a, self.child.fields) for a in self.aggregates)
        return f"Aggregate by {groups}: {aggs}" if aggs else f"Aggregate by {groups}"


@dataclass(frozen=True, eq=False)
class WindowAssign(Unary):
    """Assigns each row the event-time windows of its `time` column: its fields are the child's, then the window's
    start and end. A tumbling window holds each row once, a hopping window size/slide times; session windows
    depend on the other rows of their group (`spec.kind == "session"`)."""

    time: exp.Column = None  # type: ignore[assignment]
    spec: WindowSpec = None  # type: ignore[assignment]  # plan/windows.py (only its type: nodes stay free of the parsing)

    @property
    def key(self) -> Key | None:
        return self.child.key if self.spec.kind == "tumble" else None

    def expressions(self) -> list[exp.Expression]:
        return [self.time]

    def describe(self) -> str:
        return f"Window {self.spec.describe()} over {show(self.time, self.child.fields)}"


@dataclass(frozen=True, eq=False)
class SessionAggregate(Aggregate):
    """GROUP BY a session window (its child, a WindowAssign of kind session, whose start and end are among the
    groups): sessions merge and split as rows come and go, so its rule re-forms the touched partitions'."""

    @property
    def window(self) -> WindowAssign:
        return self.child  # type: ignore[return-value]

    @property
    def partition(self) -> tuple[exp.Expression, ...]:
        """The groups other than the session's start and end: each of their values forms sessions of its own
        (bound over the window's fields)."""
        bounds = {
            (f.name, f.qualifier)
            for f in self.window.fields
            if f.window_bound in ("session start", "session end")
        }
        return tuple(
            g for g in self.groups if not (isinstance(g, exp.Column) and (g.name, g.table or None) in bounds)
        )

    def describe(self) -> str:
        return "Session" + super().describe()


@dataclass(frozen=True, eq=False)
class Distinct(Unary):
    @property
    def key(self) -> Key | None:
        return self.child.key if self.child.key is not None else tuple(range(len(self.fields)))


@dataclass(frozen=True, eq=False)
class UnionAll(Node):
    inputs: tuple[Node, ...] = ()

    @property
    def children(self) -> tuple[Node, ...]:
        return self.inputs

    def describe(self) -> str:
        return f"UnionAll of {len(self.inputs)}"


@dataclass(frozen=True, eq=False)
class Limit(Unary):
    """`ORDER BY ... LIMIT n` (a top-N), and `LIMIT`/`OFFSET` with or without an order: the first rows of the
    child in that order (as written: positions and SELECT aliases name the output's columns)."""

    order: tuple[str, ...] = ()  # the ORDER BY items, as Spark SQL
    limit: str | None = None
    offset: str | None = None

    def describe(self) -> str:
        parts = [
            f"first {self.limit}" if self.limit is not None else "all",
            f"after {self.offset}" if self.offset is not None else "",
            f"by {', '.join(self.order)}" if self.order else "(in no order)",
        ]
        return "Limit " + " ".join(p for p in parts if p)


@dataclass(frozen=True, eq=False)
class TopN(Unary):
    """The first `limit` rows of each partition of the child in `order` (`PARTITION BY` values; one partition
    when empty): a filter `ROW_NUMBER()/RANK()/DENSE_RANK() OVER (...) <= limit`, or `ORDER BY ... LIMIT n`.
    Its fields are the child's, then the rank (`function`'s value) when `ranked`. Rows tied on `order` are told
    apart by all their columns, in ascending order, for ROW_NUMBER and LIMIT."""

    partition: tuple[exp.Expression, ...] = ()
    order: tuple[exp.Ordered, ...] = ()
    function: str = "row_number"  # row_number, rank, dense_rank
    limit: int = 1
    ranked: bool = True

    @property
    def key(self) -> Key | None:
        """One row per partition (ROW_NUMBER ... = 1, deduplication) is keyed by the partition's columns;
        otherwise the child's key."""
        if self.function == "row_number" and self.limit == 1:
            positions = [
                next((i for i, f in enumerate(self.child.fields) if _is_ref_to(p, f)), None)
                for p in self.partition
            ]
            found = [p for p in positions if p is not None]
            if len(found) == len(positions):
                return tuple(found)
        return self.child.key

    def expressions(self) -> list[exp.Expression]:
        return [*self.partition, *(o.this for o in self.order)]

    def describe(self) -> str:
        inputs = self.child.fields
        order = ", ".join(show(o, inputs) for o in self.order)
        by = f" per {', '.join(show(p, inputs) for p in self.partition)}" if self.partition else ""
        return f"TopN {self.function.upper()} <= {self.limit}{by} by {order}"


@dataclass(frozen=True, eq=False)
class Over(Unary):
    """Window functions over partitions of the child (`... OVER (PARTITION BY p ORDER BY o [frame])`, all with
    the same PARTITION BY): its fields are the child's, then one per window, its value for the row."""

    windows: tuple[exp.Window, ...] = ()

    @property
    def partition(self) -> tuple[exp.Expression, ...]:
        return tuple(self.windows[0].args.get("partition_by") or ())

    def expressions(self) -> list[exp.Expression]:
        """What the windows read, not the windows themselves (analysis flags a window it finds elsewhere)."""
        parts: list[exp.Expression] = []
        for w in self.windows:
            parts.extend(a for a in w.this.iter_expressions())
            parts.extend(w.args.get("partition_by") or ())
            parts.extend(o.this for o in (w.args["order"].expressions if w.args.get("order") else ()))
        return parts

    def describe(self) -> str:
        return "Over " + ", ".join(
            f"{show(w, self.child.fields)} AS {show_name(f.name)}"
            for w, f in zip(self.windows, self.fields[len(self.child.fields) :])
        )


@dataclass(frozen=True, eq=False)
class Opaque(Node):
    """Something the incremental compiler does not understand (yet): the view is recomputed in full."""

    inputs: tuple[Node, ...] = ()
    reason: str = ""
    what: str = ""

    @property
    def children(self) -> tuple[Node, ...]:
        return self.inputs

    def describe(self) -> str:
        return f"Opaque {self.what}"


def with_children(node: Node, children: list[Node]) -> Node:
    """The same node over other inputs (in the order of `children`)."""
    if isinstance(node, Unary):
        return replace(node, child=children[0])
    if isinstance(node, Join):
        return replace(node, left=children[0], right=children[1])
    if isinstance(node, (UnionAll, Opaque)):
        return replace(node, inputs=tuple(children))
    return node


def conjuncts(e: exp.Expression) -> list[exp.Expression]:
    """The parts of `a AND b AND ...` (a parenthesized OR stays one part)."""
    return _parts(e, exp.And)


def disjuncts(e: exp.Expression) -> list[exp.Expression]:
    """The branches of `a OR b OR ...` (a parenthesized AND stays one branch)."""
    return _parts(e, exp.Or)


def _parts(e: exp.Expression, kind: type[exp.Expression]) -> list[exp.Expression]:
    if isinstance(e, exp.Paren) and isinstance(e.this, kind):
        return _parts(e.this, kind)
    if isinstance(e, kind):
        return _parts(e.this, kind) + _parts(e.expression, kind)
    return [e]


def conjunction(parts: list[exp.Expression]) -> exp.Expression:
    result = parts[0]
    for p in parts[1:]:
        result = exp.And(this=result, expression=p)
    result.type = exp.DataType.build("BOOLEAN")
    return result


def _is_ref_to(expression: exp.Expression, target: Field) -> bool:
    return (
        isinstance(expression, exp.Column)
        and expression.name == target.name
        and (expression.table or None) == target.qualifier
    )


def _render(expression: exp.Expression, name: str, inputs: tuple[Field, ...]) -> str:
    sql = show(expression, inputs)
    return (
        sql
        if isinstance(expression, exp.Column) and expression.name == name
        else f"{sql} AS {show_name(name)}"
    )


_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def show_name(name: str) -> str:
    return name if _PLAIN.fullmatch(name) else "`" + name.replace("`", "``") + "`"


def show(expression: exp.Expr, inputs: tuple[Field, ...] = ()) -> str:
    """An expression as readable Spark SQL: identifiers quoted only where they must be, and columns qualified
    only where their name is not unique among the `inputs` fields."""
    names = [f.name.lower() for f in inputs]

    def simplify(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and node.meta.get("proctime"):
            return exp.Anonymous(this="PROCTIME", expressions=[])
        if isinstance(node, exp.Column) and node.table and names.count(node.name.lower()) == 1:
            return exp.column(node.name, quoted=not _PLAIN.fullmatch(node.name))
        if isinstance(node, exp.Identifier) and node.quoted and _PLAIN.fullmatch(node.name):
            return exp.to_identifier(node.name, quoted=False)
        return node

    return expression.transform(simplify).sql("spark")


def requalify(node: Node, qualifier: str | None) -> Node:
    """The same node, its fields seen under another FROM alias (a subquery or CTE used in FROM)."""
    return replace(node, fields=tuple(replace(f, qualifier=qualifier) for f in node.fields))
