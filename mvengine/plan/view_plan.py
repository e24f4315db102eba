"""The plan of one view: its operator tree and everything `mv plan` reports about it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
from sqlglot import exp

from mvengine.errors import SqlError
from mvengine.names import RESERVED_VIEW_COLUMNS
from mvengine.plan.analysis import (
    by_arrival,
    changelog_kind,
    full_refresh_reasons,
    is_append_only,
    is_deterministic,
    row_by_row,
    state_of,
)
from mvengine.plan.binder import Binder
from mvengine.plan.nodes import (
    Aggregate,
    Distinct,
    Field,
    Filter,
    LookupJoin,
    Node,
    Over,
    Project,
    Scan,
    SessionAggregate,
    TopN,
    WindowAssign,
    show,
    show_name,
)
from mvengine.plan.operators.over import event_time_order
from mvengine.plan.rewrites.passes import rewritten
from mvengine.plan.scope import Relation, Scope
from mvengine.plan.temporal_sql import spell_temporal_joins
from mvengine.plan.types import type_name
from mvengine.plan.windows import duration, spark_sql
from mvengine.sql.expectations import check_columns, kept_rows
from mvengine.sql.time_syntax import Emit
from mvengine.sql.types import arrow_type
from mvengine.sql.views import ViewDef


@dataclass(frozen=True)
class ViewPlan:
    view: ViewDef
    root: Node
    inputs: tuple[str, ...]
    columns: tuple[Field, ...]
    key: tuple[str, ...] | None  # () for a view of at most one row (an aggregate without GROUP BY)
    changelog: str  # "append-only", "retract" or "upsert"
    strategy: str  # "incremental" or "full"
    reason: str | None
    state: str
    bounded_state: bool
    notes: tuple[str, ...]
    spark_sql: str = ""  # the query as SQL Spark runs (windows spelled its way: plan/windows.spark_sql)
    by_arrival: bool = False  # its rows depend on when input rows arrived: never recomputed by cost
    row_by_row: bool = (
        False  # each row of one input row (analysis.row_by_row): inserts never recomputed by cost
    )
    drops: tuple[str, ...] = ()  # "table: condition" of the rows its inputs' and its own expectations drop

    @property
    def name(self) -> str:
        return self.view.name

    @property
    def drops_own(self) -> bool:
        """Whether its own expectations drop rows: its root is then the Filter that drops them."""
        return kept_rows(self.view.expectations) is not None

    def arrow_schema(self) -> pa.Schema | None:
        """Its columns in the Arrow types of the Spark types its plan gives them (None: a type without one)."""
        fields = []
        for f in self.columns:
            t = arrow_type(f.type)
            if t is None:
                return None
            fields.append(pa.field(f.name, t))
        return pa.schema(fields)

    def relation(self) -> Relation:
        """How views reading this one see it."""
        key = None if self.key is None else tuple(i for i, f in enumerate(self.columns) if f.name in self.key)
        return Relation(self.name, "view", self.columns, key, self.changelog == "append-only")

    def window(self) -> str | None:
        """The event-time window the view groups by, in words (None without one)."""
        found = [n for n in self.root.walk() if isinstance(n, WindowAssign)]
        return "; ".join(f"{n.spec.describe()} over {show(n.time, n.child.fields)}" for n in found) or None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "file": self.view.file,
            "line": self.view.line,
            "inputs": list(self.inputs),
            "columns": [
                {"name": f.name, "type": type_name(f.type), "nullable": f.nullable} for f in self.columns
            ],
            "key": None if self.key is None else list(self.key),
            "event_time": [f.name for f in self.columns if f.time_attr],
            "window": self.window(),
            "emit": self.view.emit.text if self.view.emit else None,
            "changelog": self.changelog,
            "strategy": self.strategy,
            "reason": self.reason,
            "refresh_policy": self.view.refresh_policy,
            "target_lag": self.view.target_lag / 1_000_000
            if isinstance(self.view.target_lag, int)
            else self.view.target_lag,
            "state": self.state,
            "bounded_state": self.bounded_state,
        }


def plan_view(view: ViewDef, lookup: Callable[[str], Relation | None], known: list[str]) -> ViewPlan:
    """Bind the view's query against the sources and views `lookup` finds, and analyse the result."""
    binder = Binder(lookup, known, view.file, f"view {view.name}")
    root = rewritten(binder.query(view.query))
    columns = root.fields
    if view.column_names is not None:
        if len(view.column_names) != len(columns):
            raise _view_error(
                view,
                f"the view names {len(view.column_names)} columns but its SELECT has {len(columns)}",
                "list one name per selected column, or drop the column list",
            )
        columns = tuple(replace(f, name=n) for f, n in zip(columns, view.column_names))
        _check_unique(columns, view)
    for f in columns:
        if f.name.lower() in RESERVED_VIEW_COLUMNS:
            raise _view_error(
                view,
                f"column name {f.name} is reserved for mvengine's own columns",
                f"rename it with AS; reserved: {', '.join(sorted(RESERVED_VIEW_COLUMNS))}",
            )
        if f.type.this == exp.DataType.Type.INTERVAL:  # (a difference of two timestamps, say)
            raise _view_error(
                view,
                f"column {show_name(f.name)} is an {type_name(f.type)}, a type Delta tables cannot hold",
                "select a number instead, e.g. unix_seconds(b.ts) - unix_seconds(a.ts) AS seconds",
            )
    columns = tuple(replace(f, qualifier=None) for f in columns)
    root = replace(root, fields=columns)
    view = replace(
        view,
        expectations=check_columns(
            view.expectations, [f.name for f in columns], view.file, f"view {view.name}"
        ),
    )
    kept = kept_rows(view.expectations)
    drops = list(dict.fromkeys(binder.drops))
    if kept is not None:  # the rows its DROP ROW / QUARANTINE expectations leave, in every computation of it
        predicate = binder.bind(kept, Scope(relations=[(view.name, root)]))
        for column in predicate.find_all(exp.Column):
            column.set("table", None)  # the view's own columns, unqualified as its fields are
        root = Filter(fields=columns, child=root, predicate=predicate)
        drops.append(f"{view.name}: {kept.sql('spark')}")
    reasons = binder.full_reasons + [r for r in full_refresh_reasons(root) if r not in binder.full_reasons]
    if view.allowed_lateness is None:
        reasons += [
            f"window functions without PARTITION BY ({', '.join(show(w, n.child.fields) for w in n.windows)}) "
            "read every row at every batch, unless the view sets allowed_lateness: then the rows behind it fold "
            "into one row of running values"
            for n in root.walk()
            if isinstance(n, Over) and not n.partition
        ]
    if reasons and view.refresh_policy == "incremental_strict":
        raise SqlError(
            f"refresh_policy 'incremental_strict', but the view cannot be maintained incrementally: "
            f"{'; '.join(reasons)}",
            file=view.file,
            line=view.line,
            obj=f"view {view.name}",
            hint="rewrite the query without what is listed, or choose refresh_policy 'auto'",
        )
    if view.refresh_policy == "full":
        reasons = ["refresh_policy 'full'"]
    strategy = "full" if reasons else "incremental"
    if view.allowed_lateness is not None:
        _check_lateness(view, root, strategy)
    state = state_of(root, strategy, purged=view.allowed_lateness is not None)
    expiring = None if view.state_ttl is None else _check_state_ttl(view, root, strategy)
    key = None if root.key is None else tuple(columns[i].name for i in root.key)
    deterministic = is_deterministic(root) and not binder.random_sampling
    changelog = changelog_kind(root, deterministic)
    if expiring is not None and changelog == "append-only":  # (keys leave as their state expires)
        changelog = "upsert" if key is not None else "retract"
    if view.emit is not None:
        _check_emit(view, view.emit, columns, strategy, root)
        if (
            view.emit.watermark_past is not None
            and view.emit.late_after is None
            and strategy == "incremental"
        ):
            changelog = "append-only"  # each window's row comes out once, final; what comes later is dropped
    held = (
        "; emit: the changes of windows not yet emitted (their rows wait in _state/emit_pending)"
        if view.emit is not None and strategy == "incremental"
        else ""
    )
    arrival = by_arrival(root) if strategy == "incremental" else None
    notes = _origin(view) + list(view.rewrites) + binder.notes
    if arrival is not None:
        effect = (
            "takes the rows as Spark reads them"
            if arrival != "PROCTIME()"
            else "joins every row to the dimension as it is then (a lookup join)"
            if any(isinstance(n, LookupJoin) for n in root.walk())
            else "gives every row its own time"
        )
        notes.append(
            f"{arrival} depends on when rows arrived, which only batches know: never recomputed by cost; "
            f"a full computation (the first refresh, mv refresh --full) {effect}"
        )
    if expiring is not None:
        notes.append(_expiry_note(view, expiring))
    notes += [
        f"without the rows of {d.split(': ', 1)[0]} its DROP ROW / QUARANTINE expectations fail "
        f"(keeps {d.split(': ', 1)[1]})"
        for d in drops
    ]
    return ViewPlan(
        view,
        root,
        tuple(binder.inputs),
        columns,
        key,
        changelog,
        strategy,
        "; ".join(reasons) if reasons else None,
        state.description + held + ("" if expiring is None else f"; {_expiry_state(view)}"),
        state.bounded or expiring is not None,
        tuple(notes),
        spark_sql(spell_temporal_joins(view.query, binder.temporal_joins), binder.table_windows),
        by_arrival=arrival is not None or expiring is not None,
        row_by_row=row_by_row(root),
        drops=tuple(drops),
    )


def _check_lateness(view: ViewDef, root: Node, strategy: str) -> None:
    """allowed_lateness drops late rows where they meet their window: every window must be what an aggregate
    groups by (a window under a join would see rows its other input kept); window functions must order by an
    event-time attribute first and read an append-only, stateless input (scans, filters, projections: what
    they read of it is their own rows; a late deletion of a row would leave it in the view beside its update,
    whose key it shares, as Flink refuses OVER over a retracting input)."""
    where: dict[str, Any] = {"file": view.file, "line": view.line, "obj": f"view {view.name}"}
    windows = event_time_windows(root)
    grouped = {id(n.child) for n in root.walk() if isinstance(n, Aggregate)}
    overs = [n for n in root.walk() if isinstance(n, Over)]
    for over in overs:
        if (
            any(not isinstance(n, (Scan, Filter, Project)) for n in over.child.walk())
            or strategy != "incremental"
        ):
            raise SqlError(
                "allowed_lateness on window functions needs them maintained incrementally over a source's "
                "rows (scans, filters and projections under them)",
                **where,
                hint="make the join or aggregate a view of its own and compute the window functions over "
                "it, or drop the option (mv plan says why a view is recomputed in full)",
            )
        if event_time_order(over) is None:
            raise SqlError(
                "allowed_lateness on window functions needs each to ORDER BY the same event-time column "
                "first, ascending (NULLs first)",
                **where,
                hint="order the windows by a source's WATERMARK column first (ORDER BY ts, ...), or drop "
                "the option",
            )
        if not is_append_only(over.child):
            raise SqlError(
                "allowed_lateness on window functions needs an append-only input: a late update would "
                "leave the row it replaces in the view",
                **where,
                hint="declare the source WITH ('append_only' = 'true') if rows are only ever added, or "
                "drop the option",
            )
    if overs and not windows:
        return
    if not windows:
        raise SqlError(
            "allowed_lateness is for views that group by an event-time window or order window functions "
            "by event time",
            **where,
            hint="group by window(ts, ...) of a source's WATERMARK column, or drop the option",
        )
    if any(id(w) not in grouped for w in windows):
        raise SqlError(
            "allowed_lateness needs the window to be what an aggregate groups by",
            **where,
            hint="GROUP BY the window directly (a window under a join or without GROUP BY cannot "
            "drop late rows consistently)",
        )


Expiring = Aggregate | Distinct | TopN | Over
# The operators whose partitions a state_ttl expires, by name.
_PARTITIONED: dict[type[Node], str] = {
    TopN: "top-N",
    Over: "window function",
    SessionAggregate: "session window",
}
# ...and how to give one of a single partition more (an OVER without PARTITION BY is recomputed in full).
_MORE_PARTITIONS: dict[type[Node], str] = {
    TopN: "add PARTITION BY to the ranking, or drop the option (a top-N without one keeps N rows and a buffer, a "
    "bounded state already)",
    SessionAggregate: "GROUP BY a column beside the session window (each value's rows form sessions of their "
    "own), or bound the state with allowed_lateness instead",
}


def _check_state_ttl(view: ViewDef, root: Node, strategy: str) -> Expiring:
    """state_ttl expires the keys of the view's one GROUP BY or DISTINCT, or the partitions of its one top-N,
    window function or session window, which must be its top operator (under filters and projections only): a
    key's rows then leave the view with its state (their retraction comes from that state), and a key that comes
    back is computed again from its input rows, which only a stateless input can give (a GROUP BY below would
    itself have expired keys). Returns that operator."""
    ttl = duration(view.state_ttl or 0)
    if strategy != "incremental":
        raise _view_error(
            view,
            f"state_ttl '{ttl}': the view is recomputed in full on every refresh, so it keeps no state to expire",
            "drop the option, or make the view incremental (mv plan says why it is not)",
        )
    node = root
    while isinstance(node, (Filter, Project)):
        node = node.child
    partitioned = isinstance(node, (TopN, Over, SessionAggregate))
    if isinstance(node, (TopN, SessionAggregate)) and not node.partition:
        raise _view_error(
            view,
            f"state_ttl '{ttl}' expires the partitions of a {_PARTITIONED[type(node)]}, and this one has a single "
            "partition: the whole view would leave whenever its input stays still that long",
            _MORE_PARTITIONS[type(node)],
        )
    if not (partitioned or isinstance(node, Distinct) or (type(node) is Aggregate and node.groups)):
        raise _view_error(
            view,
            f"state_ttl '{ttl}' expires the keys of a GROUP BY or SELECT DISTINCT, or the partitions of a top-N, "
            "window function or session window, at the top of the view's query, and this view has none",
            "state_ttl is for views that group (GROUP BY with keys), deduplicate (SELECT DISTINCT), rank or "
            "compute windows per partition; a view without one of these keeps no state per key (joins, "
            "filters and projections keep none)",
        )
    assert isinstance(node, (Aggregate, Distinct, TopN, Over))  # (as the checks above found)
    inner = node.window.child if isinstance(node, SessionAggregate) else node.child
    if any(isinstance(n, (Aggregate, Distinct, TopN, Over)) for n in inner.walk()):
        raise _view_error(
            view,
            f"state_ttl '{ttl}' needs what it expires to read a stateless input, and this view's "
            f"{_expiring_name(node)} reads another aggregate, DISTINCT, ranking or window function",
            "make the inner query a view of its own (with its own state_ttl, if it should have one)",
        )
    clashes = [o for o, set_ in (("allowed_lateness", view.allowed_lateness), ("EMIT", view.emit)) if set_]
    if clashes:
        raise _view_error(
            view,
            f"state_ttl and {clashes[0]} on one view: both decide when its state ends",
            "bound a windowed view's state with allowed_lateness alone",
        )
    arrival = by_arrival(root)
    if arrival is not None:
        raise _view_error(
            view,
            f"state_ttl counts a key that comes back again from its input rows, which cannot say what "
            f"{arrival} gave when they arrived",
            "drop the option, or what depends on arrival",
        )
    return node


def _expiring_name(node: Node) -> str:
    return _PARTITIONED.get(type(node)) or ("DISTINCT" if isinstance(node, Distinct) else "GROUP BY")


def _expiry_state(view: ViewDef) -> str:
    return f"a key untouched for {duration(view.state_ttl or 0)} of batch clock expires (state_ttl)"


def _expiry_note(view: ViewDef, node: Expiring) -> str:
    keys, again = (
        ("its groups", "counted")
        if type(node) is Aggregate
        else ("its distinct rows", "counted")
        if isinstance(node, Distinct)
        else (f"the partitions of its {_expiring_name(node)}", "computed")
    )
    ttl = duration(view.state_ttl or 0)
    return (
        f"state_ttl '{ttl}': {keys} untouched by its input for {ttl} (batch clock) leave the view and its "
        f"state; one that comes back is {again} again from its input rows. The snapshot holds the query's rows "
        f"of the keys touched within {ttl}, not every row a recomputation gives; never recomputed by cost"
    )


def _origin(view: ViewDef) -> list[str]:
    if view.origin is None:
        return []
    return [f"the join input {view.origin}, which keeps state, maintained as a view of its own"]


def event_time_windows(root: Node) -> list[WindowAssign]:
    """The plan's windows over an event-time attribute (a source's WATERMARK column): those a watermark passes."""
    return [n for n in root.walk() if isinstance(n, WindowAssign) and n.time.meta.get("time_attr")]


def _check_emit(view: ViewDef, emit: Emit, columns: tuple[Field, ...], strategy: str, root: Node) -> None:
    """An EMIT clause needs an event-time window among the view's columns (its bounds are selected); WATERMARK
    PAST names one of its bounds; EMIT AFTER holds rows in the state of an incremental view."""
    where: dict[str, Any] = {
        "file": view.file,
        "line": emit.line,
        "col": emit.col,
        "obj": f"view {view.name}",
    }
    bounds = [f.name for f in columns if f.window_bound is not None]
    if not bounds or not event_time_windows(root):
        raise SqlError(
            f"{emit.text}: the view has no event-time window, so there is nothing to emit per window",
            **where,
            hint="group by a window of a source's WATERMARK column, e.g. GROUP BY "
            "window(ts, '1 minute'), and select its end",
        )
    if emit.watermark_past is not None:
        column = next((f for f in columns if f.name.lower() == emit.watermark_past.lower()), None)
        if column is None or column.window_bound is None:
            raise SqlError(
                f"{emit.text}: {emit.watermark_past} is not a window bound of the view",
                **where,
                hint=f"name one of its window bounds: {', '.join(bounds)}",
            )
    elif strategy != "incremental":
        raise SqlError(
            f"{emit.text}: EMIT AFTER holds rows in the state of an incremental view, and this view is "
            "recomputed in full",
            **where,
            hint="drop the EMIT clause, or make the view incremental",
        )


def _check_unique(columns: tuple[Field, ...], view: ViewDef) -> None:
    seen: set[str] = set()
    for f in columns:
        if f.name.lower() in seen:
            raise _view_error(
                view,
                f"column name {show_name(f.name)} is used twice",
                "give every column of the view its own name",
            )
        seen.add(f.name.lower())


def _view_error(view: ViewDef, message: str, hint: str) -> SqlError:
    """An error located at the view's CREATE statement."""
    return SqlError(message, file=view.file, line=view.line, obj=f"view {view.name}", hint=hint)
