"""From a view's SELECT (a sqlglot tree) to a tree of mvengine operators, resolving every name on the way.

Names are resolved the way Spark resolves them (case-insensitively, innermost scope first, SELECT aliases allowed
in GROUP BY, HAVING and ORDER BY), and every mistake becomes a SqlError naming the file, the line and column of
the offending name, the view, and a "did you mean" hint. Constructs the incremental compiler does not understand
become `Opaque` nodes or full-refresh reasons; they are planned, never rejected.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from sqlglot import exp

from mvengine.errors import SqlError
from mvengine.names import did_you_mean
from mvengine.plan.functions import NULLS_OPTIONS, aggregate_function, in_window, spark_aggregates
from mvengine.plan.naming import spark_name
from mvengine.plan.nodes import (
    Aggregate,
    Distinct,
    Field,
    Filter,
    Join,
    Limit,
    Node,
    Opaque,
    Project,
    Scan,
    SessionAggregate,
    UnionAll,
    WindowAssign,
    conjunction,
    conjuncts,
    requalify,
    show,
    show_name,
)
from mvengine.plan.rewrites.decorrelate import constant_key, split_correlation
from mvengine.plan.rewrites.joins import (
    JoinStep,
    build_joins,
    connected_order,
    constant_equality,
    equality,
    factor_or,
    join_kind,
    push_clock_filters,
    push_equalities,
)
from mvengine.plan.scope import (
    Relation,
    Scope,
    field_named,
    nullable,
    resolve,
    scope_fields,
)
from mvengine.plan.temporal_sql import AsOf
from mvengine.plan.time_bounds import is_instant
from mvengine.plan.types import aggregate_type, build, infer_nullable, infer_type, wider_type
from mvengine.plan.windows import (
    BOUND_FUNCTIONS,
    WindowError,
    WindowSpec,
    function_name,
    group_window,
    table_window,
)


class Binder:
    """Binds the SELECT of one view. `lookup` finds sources and views by name (case-insensitively)."""

    def __init__(
        self, lookup: Callable[[str], Relation | None], known: list[str], file: str, obj: str
    ) -> None:
        self.lookup = lookup
        self.known = known
        self.file = file
        self.obj = obj
        self.inputs: list[str] = []  # sources and views read, in order of first appearance
        self.ctes: dict[str, Node] = {}  # the CTEs visible where binding currently is
        self.full_reasons: list[str] = []  # constructs that force a full refresh, found while binding
        self.notes: list[str] = []
        self.random_sampling = False  # TABLESAMPLE: another sample on every run
        self.table_windows: dict[
            str, str
        ] = {}  # a window function in FROM → its Spark SQL (windows.spark_sql)
        self.temporal_joins: dict[
            str, AsOf
        ] = {}  # a temporal join's table → what Spark needs (temporal_sql.py)
        self.drops: list[str] = []  # "source: condition" of the inputs read without rows expectations drop

    # -- errors -----------------------------------------------------------------------------------------------

    def error(self, message: str, at: exp.Expr | None = None, hint: str | None = None) -> SqlError:
        line, col = source_position(at)
        return SqlError(message, file=self.file, line=line, col=col, obj=self.obj, hint=hint)

    def full(self, reason: str) -> None:
        if reason not in self.full_reasons:
            self.full_reasons.append(reason)

    # -- queries ----------------------------------------------------------------------------------------------

    def query(
        self,
        q: exp.Expr,
        outer: Scope | None = None,
        ctes: dict[str, Node] | None = None,
        names_required: bool = True,
    ) -> Node:
        visible = self.ctes
        try:
            return self._query(spark_aggregates(q), outer, dict(ctes or {}), names_required)
        finally:
            self.ctes = visible

    def _query(self, q: exp.Expr, outer: Scope | None, ctes: dict[str, Node], names_required: bool) -> Node:
        with_ = q.args.get("with_") or q.args.get("with")
        if with_ is not None:
            if with_.args.get("recursive"):
                raise self.error("recursive WITH is not supported", with_)
            for cte in with_.expressions:
                node = self.query(cte.this, outer, ctes)
                if cte.alias_column_names:
                    node = self._rename(node, cte.alias_column_names, cte)
                ctes[cte.alias.lower()] = node
        if isinstance(q, exp.Subquery):
            node = self.query(q.this, outer, ctes, names_required)
        elif isinstance(q, exp.Union):
            node = self._union(q, outer, ctes, names_required)
        elif isinstance(q, (exp.Intersect, exp.Except)):
            word = "INTERSECT" if isinstance(q, exp.Intersect) else "EXCEPT"
            left = self.query(q.this, outer, ctes, names_required)
            right = self.query(q.expression, outer, ctes, names_required=False)  # named by the left side
            self._check_arity(left, right, word, q)
            node = Opaque(
                fields=left.fields, inputs=(left, right), what=word, reason=f"{word} is recomputed in full"
            )
        elif isinstance(q, exp.Select):
            return self._select(q, outer, ctes, names_required)
        else:
            raise self.error(
                f"unsupported query: {_first_words(q)}",
                q,
                hint="a view is a SELECT, possibly with UNION ALL, JOIN, GROUP BY, DISTINCT",
            )
        return self._order_limit(q, node, None)

    def _union(self, q: exp.Union, outer: Scope | None, ctes: dict[str, Node], names_required: bool) -> Node:
        branches: list[Node] = []

        def add(part: exp.Expression) -> None:
            # The union's columns are named by its first branch, as Spark names them: the others need no names.
            branches.append(self.query(part, outer, ctes, names_required and not branches))

        def collect(part: exp.Expression) -> None:
            # UNION ALL chains flatten into one n-ary union; a UNION (distinct) inside is its own node.
            if isinstance(part, exp.Union) and not part.args.get("distinct") and not _has_modifiers(part):
                collect(part.this)
                collect(part.expression)
            else:
                add(part)

        if q.args.get("distinct"):
            add(q.this)
            add(q.expression)
        else:
            collect(q.this)
            collect(q.expression)
        first = branches[0]
        for other in branches[1:]:
            self._check_arity(first, other, "UNION", q)
        fields = tuple(
            Field(
                f.name,
                wider_type([b.fields[i].type for b in branches]),
                any(b.fields[i].nullable for b in branches),
                None,
                all(b.fields[i].time_attr for b in branches),
            )
            for i, f in enumerate(first.fields)
        )
        union = UnionAll(fields=fields, inputs=tuple(branches))
        return Distinct(fields=fields, child=union) if q.args.get("distinct") else union

    def _check_arity(self, left: Node, right: Node, word: str, at: exp.Expression) -> None:
        if len(left.fields) != len(right.fields):
            raise self.error(
                f"the branches of {word} have {len(left.fields)} and {len(right.fields)} columns",
                at,
                hint=f"every branch of {word} must select the same number of columns",
            )

    # -- SELECT -----------------------------------------------------------------------------------------------

    def _select(
        self, q: exp.Select, outer: Scope | None, ctes: dict[str, Node], names_required: bool
    ) -> Node:
        q = _named_windows(q)
        if q.args.get("qualify") is not None:
            return self._qualify(q, outer, ctes, names_required)
        scope = Scope(outer=outer)
        self.ctes = ctes  # for subqueries inside expressions, which bind() meets
        from_ = q.args.get("from_") or q.args.get("from")
        if from_ is None:
            node: Node = Opaque(
                fields=(), what="SELECT without FROM", reason="a SELECT without FROM is a constant"
            )
        else:
            first, steps = self._from(q, from_, scope, ctes)
            laterals = [self._lateral(lateral, scope) for lateral in q.args.get("laterals") or []]
            where = q.args.get("where")
            node = self._where(where.this if where is not None else None, first, steps, laterals, scope, ctes)
            node, q = self._group_window(q, node, scope)
        projections = self._expand_stars(q, scope)
        written = projections  # as written: they name the columns
        group = q.args.get("group")
        has_aggregates = any(_aggregates_in(p) for p in projections) or (q.args.get("having") is not None)
        grouping_sets = group is not None and any(
            isinstance(g, (exp.Rollup, exp.Cube, exp.GroupingSets)) for g in group.expressions
        )
        if group is not None or has_aggregates:
            node, projections, having = self._aggregate(q, node, projections, scope)
            if isinstance(node.child, WindowAssign) and node.child.spec.kind == "session":
                node = SessionAggregate(
                    fields=node.fields, child=node.child, groups=node.groups, aggregates=node.aggregates
                )
            if having is not None:
                node = Filter(fields=node.fields, child=node, predicate=having)
            bound = projections
        else:
            bound = [self.bind(p, scope) for p in projections]
        fields = self._output_fields(written, bound, names_required, q)
        node = Project(fields=fields, child=node, projections=tuple(_unalias(b) for b in bound))
        if grouping_sets:
            node = Opaque(
                fields=tuple(replace(f, nullable=True) for f in fields),
                inputs=(node,),
                what="GROUPING SETS",
                reason="GROUP BY ROLLUP, CUBE or GROUPING SETS is recomputed in full",
            )
        if q.args.get("distinct") is not None:
            if q.args["distinct"].args.get("on"):
                raise self.error("DISTINCT ON is not Spark SQL", q.args["distinct"])
            node = Distinct(fields=node.fields, child=node)
        return self._order_limit(q, node, (projections, scope))

    def _qualify(
        self, q: exp.Select, outer: Scope | None, ctes: dict[str, Node], names_required: bool
    ) -> Node:
        """`SELECT ... QUALIFY p`, as Spark evaluates it (after the windows, before DISTINCT, ORDER BY and LIMIT):
        the SELECT without those, with each window of p (and each input column p reads that is not selected)
        as a column of its own, filtered by p over them. The columns are dropped again above the filter; a
        top-N written with QUALIFY is then the same plan as one written with a subquery."""
        inner = q.copy()
        predicate = inner.args["qualify"].this
        for part in ("qualify", "distinct", "order", "limit", "offset"):
            inner.set(part, None)
        selected = {p.alias_or_name.lower() for p in inner.expressions}
        helpers: list[exp.Expression] = []

        def lift(node: exp.Expression) -> exp.Expression:
            if isinstance(node, exp.Window) or (
                isinstance(node, exp.Column) and (node.table or node.name.lower() not in selected)
            ):
                name = f"__qualify_{len(helpers)}"
                helpers.append(_alias(node.copy(), name))
                return exp.column(name, quoted=True)
            return node

        predicate = predicate.copy().transform(lift)
        inner.set("expressions", [*inner.expressions, *helpers])
        wrapper = (
            exp.select("*")
            .from_(exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier("__qualified"))))
            .where(predicate)
        )
        node = self.query(wrapper, outer, ctes, names_required)
        kept = tuple(f for f in node.fields if not f.name.startswith("__qualify_"))
        node = Project(fields=kept, child=node, projections=tuple(f.ref() for f in kept))
        if q.args.get("distinct") is not None:
            node = Distinct(fields=node.fields, child=node)
        return self._order_limit(q, node, None)

    def _from(
        self, q: exp.Select, from_: exp.From, scope: Scope, ctes: dict[str, Node]
    ) -> tuple[Node, list[JoinStep]]:
        """The first FROM item and the join steps after it; the WHERE clause may still add join conditions."""
        alias, first = self._from_item(from_.this, scope, ctes)
        scope.relations.append((alias, first))
        steps: list[JoinStep] = []
        for j in q.args.get("joins") or []:
            kind = join_kind(j)
            if kind is None:
                raise self.error(
                    f"unsupported join: {_first_words(j)}",
                    j,
                    hint="use [INNER | LEFT | RIGHT | FULL] [OUTER] JOIN ... ON, CROSS JOIN, "
                    "LEFT SEMI JOIN or LEFT ANTI JOIN",
                )
            version = j.this.args.get("version") if isinstance(j.this, exp.Table) else None
            alias, right = self._from_item(j.this, scope, ctes, versioned=version is not None)
            if scope.find(alias) is not None:
                raise self.error(
                    f"the alias {alias} is used twice in FROM",
                    j.this,
                    hint="give each table in FROM its own alias, e.g. FROM orders a JOIN orders b",
                )
            left_aliases = [a for a, _ in scope.relations]
            scope.relations.append((alias, right))
            step = JoinStep(kind, alias, right, [], [])
            if j.args.get("using"):
                self._using(j, step, scope, left_aliases)
            elif j.args.get("on") is not None:
                for conjunct in conjuncts(j.args["on"]):
                    bound = self.bind(conjunct, scope)
                    pair = equality(bound, {a.lower() for a in left_aliases}, alias.lower())
                    if pair:
                        step.equi.append(pair)
                    else:
                        step.residual.append(bound)
                for residual in [] if step.equi else step.residual:
                    pair = constant_equality(residual, alias.lower())
                    if pair:  # `ON b.one = 1`: keyed by the constant, not a cross join
                        step.residual.remove(residual)
                        step.equi.append(pair)
                        break
            elif kind not in ("cross", "inner"):
                raise self.error(f"{kind.upper()} JOIN needs an ON or USING condition", j)
            if version is not None:
                step.as_of = self._as_of(version, j, step, scope, left_aliases)
            if kind in ("semi", "anti"):
                scope.relations.pop()  # the right side of a semi/anti join is not visible after it
            # After an outer join, the NULL-padded side's columns can be NULL (for the expressions above it).
            if kind in ("left", "full"):
                scope.relations[-1] = (alias, nullable(right))
            if kind in ("right", "full"):
                scope.relations[:-1] = [(a, nullable(n)) for a, n in scope.relations[:-1]]
            steps.append(step)
        return first, steps

    def _lateral(self, lateral: exp.Lateral, scope: Scope) -> tuple[Field, ...]:
        """`LATERAL VIEW [OUTER] explode(...) alias AS col, ...`: its columns join the scope under the alias."""
        function = lateral.this
        alias_node = lateral.args.get("alias")
        alias = alias_node.name if alias_node is not None and alias_node.name else "_lateral"
        if not isinstance(function, (exp.Explode, exp.Posexplode, exp.Inline)) or not lateral.args.get(
            "view"
        ):
            raise self.error(
                f"unsupported LATERAL: {_first_words(lateral)}",
                lateral,
                hint="use LATERAL VIEW [OUTER] explode(...), posexplode(...) or inline(...)",
            )
        argument = self.bind(function.this, scope)
        element = infer_type(argument)
        params = element.expressions
        if element.this == exp.DataType.Type.MAP and len(params) == 2:
            produced = [("key", params[0]), ("value", params[1])]
        elif element.this == exp.DataType.Type.ARRAY and params:
            item = params[0]
            if isinstance(function, exp.Inline) and item.this == exp.DataType.Type.STRUCT:
                produced = [
                    (p.name, p.args["kind"]) for p in item.expressions if isinstance(p, exp.ColumnDef)
                ]
            else:
                produced = [("col", item)]
        else:
            produced = [("col", build("UNKNOWN"))]
        if isinstance(function, exp.Posexplode):
            produced.insert(0, ("pos", build("INT")))
        names = [c.name for c in alias_node.columns] if alias_node is not None and alias_node.columns else []
        if names and len(names) != len(produced):
            raise self.error(
                f"{show(function)} produces {len(produced)} columns but {len(names)} names are given", lateral
            )
        fields = tuple(
            Field(name, dtype, True, alias)
            for name, (_, dtype) in zip(names or [n for n, _ in produced], produced)
        )
        scope.relations.append((alias, Opaque(fields=fields, what="LATERAL VIEW")))
        return fields

    def _using(self, j: exp.Join, step: JoinStep, scope: Scope, left_aliases: list[str]) -> None:
        for ident in j.args["using"]:
            name = ident.name
            left = self._resolve(
                name,
                None,
                Scope(relations=[r for r in scope.relations if r[0] in left_aliases], using=scope.using),
                ident,
            )
            right_node = scope.relations[-1][1]
            right_field = field_named(right_node, name)
            if right_field is None:
                raise self.error(
                    f"USING column {name!r} is not a column of {step.alias}",
                    ident,
                    hint=did_you_mean(name, [f.name for f in right_node.fields], "its columns"),
                )
            right = right_field.ref()
            step.equi.append((left, right))
            if step.kind == "right":
                merged: exp.Expression = right
            elif step.kind == "full":
                sides = [left.copy(), right.copy()]
                for side in sides:
                    side.meta["nullable"] = True  # as Spark says, though one side is always there
                merged = exp.Coalesce(this=sides[0], expressions=[sides[1]])
                merged.type = left.type
            else:
                merged = left
            scope.using[name.lower()] = merged

    def _as_of(
        self, version: exp.Version, j: exp.Join, step: JoinStep, scope: Scope, left_aliases: list[str]
    ) -> tuple[exp.Expression, exp.Expression | None]:
        """A temporal join's time (bound over the relations before it) and its relation's version column (the
        relation's event-time attribute; None when the time is PROCTIME(): a lookup join), after checking the
        join is one: inner or left, by equalities."""
        hint = (
            "write JOIN dim FOR SYSTEM_TIME AS OF f.ts AS d ON f.k = d.k, where f.ts is a TIMESTAMP of a table "
            "before it in FROM"
        )
        where = f"{step.alias} FOR SYSTEM_TIME AS OF"
        if version.name.upper() != "TIMESTAMP" or step.kind not in ("inner", "left"):
            what = "VERSION AS OF" if version.name.upper() != "TIMESTAMP" else f"a {step.kind.upper()} JOIN"
            raise self.error(f"{where}: {what} is not a temporal join", j, hint=hint)
        before = Scope(relations=[r for r in scope.relations if r[0] in left_aliases], using=scope.using)
        time = self.bind(version.expression, before)
        if not any(True for _ in time.find_all(exp.Column)):
            raise self.error(
                f"{where} {show(time)}: a view reads its inputs as of each batch, not as of a fixed time",
                j,
                hint=hint,
            )
        if _is_processing_time(time, before):
            self._only_equalities(step, j, where)
            self.temporal_joins[j.this.sql("spark")] = AsOf(tuple(b.sql("spark") for _, b in step.equi), None)
            return time, None
        attributes = [f for f in step.node.fields if f.time_attr]
        if len(attributes) != 1:
            raise self.error(
                f"{where}: {step.alias} has no event-time attribute, which dates its rows' versions",
                j,
                hint="declare WATERMARK FOR <its time column> AS ... in its source file (or select that column "
                "unchanged in its view)",
            )
        column = attributes[0].ref()
        for what, e in (("the time", time), (f"{step.alias}'s version column", column)):
            if not is_instant(infer_type(e)):
                raise self.error(f"{where}: {what} {show(e)} is not a TIMESTAMP", j, hint=hint)
        self._only_equalities(step, j, where)
        self.temporal_joins[j.this.sql("spark")] = AsOf(
            tuple(b.sql("spark") for _, b in step.equi), column.sql("spark")
        )
        return time, column

    def _only_equalities(self, step: JoinStep, j: exp.Join, where: str) -> None:
        if not step.equi or step.residual:
            raise self.error(
                f"{where}: ON must equate columns of {step.alias} with values of the tables before it, and "
                "nothing else",
                j,
                hint="filter the dimension in a view of its own, or the join's rows in WHERE",
            )

    def _from_item(
        self, item: exp.Expression, scope: Scope, ctes: dict[str, Node], *, versioned: bool = False
    ) -> tuple[str, Node]:
        if isinstance(item, exp.Table) and item.args.get("version") is not None and not versioned:
            raise self.error(
                f"{_first_words(item)}: a view reads its inputs as of each batch; only a joined table can be "
                "read as of a time (a temporal join)",
                item,
                hint="write FROM facts f JOIN dim FOR SYSTEM_TIME AS OF f.ts AS d ON f.k = d.k",
            )
        if isinstance(item, exp.Table) and isinstance(item.this, exp.Anonymous):
            return self._table_window(item, scope, ctes)
        if isinstance(item, exp.Table):
            if not isinstance(item.this, exp.Identifier):
                raise self.error(
                    f"unsupported FROM item {_first_words(item)}",
                    item,
                    hint="read sources and views by name, or a subquery in parentheses",
                )
            if item.args.get("db") or item.args.get("catalog"):
                raise self.error(
                    f"table names cannot have a database or catalog prefix ({show(item)})",
                    item,
                    hint="a view reads the project's own sources and views, by name",
                )
            alias = item.alias_or_name
            name = item.name
            if item.args.get("sample") is not None:
                self.full("TABLESAMPLE picks random rows")
                self.random_sampling = True
            if name.lower() in ctes:
                return alias, requalify(ctes[name.lower()], alias)
            relation = self.lookup(name)
            if relation is None:
                raise self.error(
                    f"unknown table or view {name!r}",
                    item,
                    hint=did_you_mean(name, self.known + list(ctes), "sources and views"),
                )
            if relation.name not in self.inputs:
                self.inputs.append(relation.name)
            fields = tuple(replace(f, qualifier=alias) for f in relation.fields)
            scan = Scan(
                fields=fields,
                input=relation.name,
                input_kind=relation.kind,
                input_key=relation.key,
                append_only=relation.append_only,
            )
            if relation.kept is None:
                return alias, scan
            # The source as its DROP ROW / QUARANTINE expectations leave it, in every computation of the view.
            kept = self.bind(relation.kept, Scope(relations=[(alias, scan)]))
            self.drops.append(f"{relation.name}: {relation.kept.sql('spark')}")
            return alias, Filter(fields=fields, child=scan, predicate=kept)
        if isinstance(item, exp.Subquery):
            alias = item.alias or "__auto_generated_subquery_name"  # Spark's own name for it
            node = self.query(item.this, scope.outer, ctes)
            if item.args.get("alias") is not None and item.args["alias"].columns:
                node = self._rename(node, [c.name for c in item.args["alias"].columns], item)
            return alias, requalify(node, alias)
        raise self.error(
            f"unsupported FROM item {_first_words(item)}",
            item,
            hint="read sources and views by name, or a subquery in parentheses",
        )

    # -- event-time windows (plan/windows.py) ----------------------------------------------------------------

    def _table_window(self, item: exp.Table, scope: Scope, ctes: dict[str, Node]) -> tuple[str, Node]:
        """Flink's `TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), size))`: t's columns, then window_start, window_end
        and window_time (the end less one microsecond, Spark's window_time: a row's event time in its window)."""
        try:
            found = table_window(item.this)
        except WindowError as e:
            raise self.error(e.message, e.at, hint=e.hint) from None
        if found is None:
            raise self.error(
                f"unsupported FROM item {_first_words(item)}",
                item,
                hint="read sources and views by name, a subquery in parentheses, or "
                "TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '10' SECOND))",
            )
        name, spec = found
        alias = item.alias_or_name if item.alias else name
        _, inner = self._from_item(exp.Table(this=exp.to_identifier(name)), scope, ctes)
        inner = requalify(inner, alias)
        time, time_type = self._event_time(
            spec.time, Scope(relations=[(alias, inner)], outer=scope.outer), spec
        )
        bounds = (
            Field("window_start", time_type, True, alias, False, "start"),  # nullable, as Spark's window()
            Field("window_end", time_type, True, alias, False, "end"),
            Field("window_time", time_type, True, alias, True, None),
        )
        columns = ", ".join(show_name(f.name) for f in inner.fields)
        self.table_windows[item.sql("spark")] = (
            f"(SELECT {columns}, `window`.start AS window_start, `window`.end AS window_end, "
            f"window_time(`window`) AS window_time FROM (SELECT *, {spec.spark_call(show_name(time.name))} AS "
            f"`window` FROM {show_name(name)})) AS {show_name(alias)}"
        )
        return alias, WindowAssign(fields=inner.fields + bounds, child=inner, time=time, spec=spec)

    def _group_window(self, q: exp.Select, node: Node, scope: Scope) -> tuple[Node, exp.Select]:
        """A window in GROUP BY (Spark's window()/session_window(), Calcite's TUMBLE/HOP/SESSION): a
        WindowAssign under the aggregate, and the query with the call replaced by the window's bounds."""
        group = q.args.get("group")
        found: list[tuple[exp.Expression, WindowSpec]] = []
        for g in _flatten_grouping(group.expressions if group is not None else []):
            try:
                spec = group_window(g)
            except WindowError as e:
                raise self.error(e.message, e.at, hint=e.hint) from None
            if spec is not None:
                found.append((g, spec))
        if not found:
            for misplaced in q.find_all(exp.Anonymous):
                if function_name(misplaced) in BOUND_FUNCTIONS:
                    raise self.error(
                        f"{misplaced.name.upper()}(...) names the bound of a window the query does not group by",
                        misplaced,
                        hint=f"add {misplaced.name.upper().rsplit('_', 1)[0]}(...) with "
                        "the same arguments to GROUP BY",
                    )
            return node, q
        if len(found) > 1:
            raise self.error(
                "a query can group by one window",
                found[1][0],
                hint="group by one window; window the result again in a view over this one",
            )
        call, spec = found[0]
        time, time_type = self._event_time(spec.time, scope, spec)
        session = "session " if spec.kind == "session" else ""
        bounds = (
            Field("start", time_type, True, spec.qualifier, False, f"{session}start"),
            Field("end", time_type, True, spec.qualifier, False, f"{session}end"),
        )
        scope.relations.append((spec.qualifier, Opaque(fields=bounds, what="window")))
        q = q.copy()
        columns = [exp.column("start", table=spec.qualifier), exp.column("end", table=spec.qualifier)]
        items: list[exp.Expression] = []
        for g in q.args["group"].expressions:
            items.extend(c.copy() for c in columns) if g == call else items.append(g)
        q.args["group"].set("expressions", items)

        def bound(e: exp.Expression) -> exp.Expression:
            name = function_name(e)
            return exp.column(BOUND_FUNCTIONS[name], table=spec.qualifier) if name in BOUND_FUNCTIONS else e

        for part in ("expressions", "having"):
            value = q.args.get(part)
            if isinstance(value, list):
                q.set(part, [e.transform(bound) for e in value])
            elif value is not None:
                q.set(part, value.transform(bound))
        return WindowAssign(fields=node.fields + bounds, child=node, time=time, spec=spec), q

    def _event_time(
        self, e: exp.Expression, scope: Scope, spec: WindowSpec
    ) -> tuple[exp.Column, exp.DataType]:
        """The window's time column, bound: a timestamp column. An event-time attribute (a source's WATERMARK
        column) gives the window a watermark, for EMIT and allowed lateness; any other timestamp windows rows
        all the same (as Spark does), without one."""
        time = self.bind(e, scope)
        if (
            not isinstance(time, exp.Column)
            or time.type is None
            or time.type.this
            not in (
                exp.DataType.Type.TIMESTAMPTZ,
                exp.DataType.Type.TIMESTAMP,
                exp.DataType.Type.TIMESTAMPNTZ,
            )
        ):
            raise self.error(
                f"a window's time must be a timestamp column, not {show(time)}",
                e,
                hint="window a source's event-time column (its WATERMARK FOR column)",
            )
        return time, time.type

    def _rename(self, node: Node, names: list[str], at: exp.Expression) -> Node:
        if len(names) != len(node.fields):
            raise self.error(f"{len(names)} column names given for {len(node.fields)} columns", at)
        return replace(node, fields=tuple(replace(f, name=n) for f, n in zip(node.fields, names)))

    # -- WHERE ------------------------------------------------------------------------------------------------

    def _where(
        self,
        predicate: exp.Expression | None,
        first: Node,
        steps: list[JoinStep],
        laterals: list[tuple[Field, ...]],
        scope: Scope,
        ctes: dict[str, Node],
    ) -> Node:
        semi_joins: list[Join] = []
        rest: list[exp.Expression] = []
        for conjunct in conjuncts(predicate) if predicate is not None else []:
            semi = self._semi_join(conjunct, scope, ctes)
            if semi is not None:
                semi_joins.append(semi)
            else:
                bound = self.bind(conjunct, scope)
                common, either = factor_or(bound)
                if not common:
                    rest.append(bound)
                    continue
                repeated = " AND ".join(e.sql("spark") for e in common)
                self.notes.append(f"{repeated} is repeated in every branch of an OR: taken out of it")
                rest.extend([*common, either] if either is not None else common)
        written = [s.alias for s in steps]
        steps = connected_order(scope.relations[0][0], steps, rest)
        if [s.alias for s in steps] != written:
            order = ", ".join([scope.relations[0][0], *(s.alias for s in steps)])
            self.notes.append(f"FROM is joined in the order of its equalities: {order}")
        remaining = push_equalities(rest, scope, steps)
        if steps:
            first, remaining = push_clock_filters(remaining, (scope.relations[0][0], first), steps)
        node = build_joins(first, steps)
        for lateral_fields in laterals:
            node = Opaque(
                fields=node.fields + lateral_fields,
                inputs=(node,),
                what="LATERAL VIEW",
                reason="LATERAL VIEW is recomputed in full",
            )
        for semi in semi_joins:
            node = replace(semi, fields=node.fields, left=node)
        if remaining:
            node = Filter(fields=node.fields, child=node, predicate=conjunction(remaining))
        return node

    def _semi_join(self, conjunct: exp.Expression, scope: Scope, ctes: dict[str, Node]) -> Join | None:
        """`[NOT] EXISTS (...)` and `x [NOT] IN (SELECT ...)` as semi/anti joins; None for other conjuncts."""
        negated = isinstance(conjunct, exp.Not)
        inner = conjunct.this if negated else conjunct
        if isinstance(inner, exp.Paren):
            inner = inner.this
        if isinstance(inner, exp.Exists):
            query, probe = inner.this, None
        elif isinstance(inner, exp.In) and inner.args.get("query") is not None:
            query, probe = inner.args["query"], inner.this
        else:
            return None
        sub = self.query(query, scope, ctes, names_required=False)
        equi: list[tuple[exp.Expression, exp.Expression]] = []
        right = sub
        if probe is not None:
            if len(sub.fields) != 1:
                raise self.error(f"the subquery of IN must select one column, not {len(sub.fields)}", query)
            bound_probe = self.bind(probe, scope)
        kind = "anti" if negated else "semi"
        split = split_correlation(sub)
        if split is None:
            self.full("a correlated subquery other than WHERE inner = outer equalities")
            right, pairs = sub, list[tuple[exp.Expression, exp.Expression]]()
        else:
            right, pairs = split
        equi.extend(pairs)
        if split is not None and not pairs and probe is None:
            # An uncorrelated [NOT] EXISTS: either every row of the left side matches or none does. One constant
            # key on both sides makes it the equi semi (anti) join the join rule maintains.
            equi.append((constant_key(), constant_key()))
        if probe is not None:
            inner_expr = (
                sub.projections[0]
                if isinstance(sub, Project) and split and right is not sub
                else sub.fields[0].ref()
            )
            equi.insert(0, (bound_probe, inner_expr))
        null_aware = negated and probe is not None
        # The left side is the node the WHERE clause filters; the caller puts it in.
        return Join(
            fields=(),
            left=None,  # type: ignore[arg-type]
            right=right,
            kind=kind,
            equi=tuple(equi),
            null_aware=null_aware,
        )

    # -- GROUP BY ---------------------------------------------------------------------------------------------

    def _aggregate(
        self, q: exp.Select, child: Node, projections: list[exp.Expression], scope: Scope
    ) -> tuple[Aggregate, list[exp.Expression], exp.Expression | None]:
        aliases = {p.alias.lower(): p.this for p in projections if isinstance(p, exp.Alias)}
        groups: list[exp.Expression] = []
        group = q.args.get("group")
        for g in _flatten_grouping(group.expressions if group is not None else []):
            if isinstance(g, exp.Literal) and not g.is_string:
                position = int(g.name)
                if not 1 <= position <= len(projections):
                    raise self.error(
                        f"GROUP BY {position} is not a column position (1..{len(projections)})", g
                    )
                g = _unalias(projections[position - 1])
            elif (
                isinstance(g, exp.Column)
                and not g.table
                and g.name.lower() in aliases
                and g.name.lower() not in {c.lower() for c in scope.columns()}
            ):
                g = aliases[g.name.lower()]
            bound = self.bind(g, scope)
            if not any(bound == existing for existing in groups):
                groups.append(bound)
        aggregates: list[exp.Expression] = []
        bound_projections = [self.bind(p, scope, aggregates=True) for p in projections]
        having = q.args.get("having")
        bound_having = None
        if having is not None:
            bound_having = self.bind(_resolve_aliases(having.this, aliases, scope), scope, aggregates=True)
        group_names = _group_names(groups)
        group_fields = [
            Field(n, infer_type(g), infer_nullable(g), None, False, g.meta.get("window_bound"))
            for n, g in zip(group_names, groups)
        ]

        def over(e: exp.Expression) -> exp.Expression:
            for i, g in enumerate(groups):
                if e == g:
                    return group_fields[i].ref()
            if _is_aggregate(e):
                for i, a in enumerate(aggregates):
                    if e == a:
                        return agg_refs[i]
                aggregates.append(e)
                agg_refs.append(self._agg_field(e, len(aggregates) - 1).ref())
                return agg_refs[-1]
            if isinstance(e, exp.Column) and not e.meta.get("outer"):
                name = show(e, scope_fields(scope))
                raise self.error(
                    f"column {name} is neither in GROUP BY nor inside an aggregate",
                    e,
                    hint=f"add it to GROUP BY, or aggregate it (e.g. MAX({name}))",
                )
            if isinstance(e, exp.Query):
                return e
            e = e.copy()
            for child_expr in list(e.iter_expressions()):
                child_expr.replace(over(child_expr))
            return e

        agg_refs: list[exp.Column] = []
        rewritten = [_realias(p, over(_unalias(p))) for p in bound_projections]
        having_rewritten = over(bound_having) if bound_having is not None else None
        agg_fields = tuple(self._agg_field(a, i) for i, a in enumerate(aggregates))
        for a in aggregates:
            self._check_aggregate(a)
        node = Aggregate(
            fields=tuple(group_fields) + agg_fields,
            child=child,
            groups=tuple(groups),
            aggregates=tuple(aggregates),
        )
        for e in [*rewritten, *([having_rewritten] if having_rewritten is not None else [])]:
            for column in e.find_all(exp.Column):
                column.meta.setdefault("nullable", True)
        return node, rewritten, having_rewritten

    def _agg_field(self, agg: exp.Expression, i: int) -> Field:
        """The field holding aggregate `agg` (an AggFunc, with FILTER (WHERE ...) or IGNORE NULLS)."""
        agg = aggregate_function(agg)
        assert isinstance(agg, exp.AggFunc)  # _aggregates_in found it
        arg = agg.this.expressions[0] if isinstance(agg.this, exp.Distinct) else agg.this
        arg_type = arg.type if isinstance(arg, exp.Expression) and not isinstance(arg, exp.Star) else None
        dtype = aggregate_type(agg, arg_type) or infer_type(agg.copy())
        return Field(f"_a{i}", dtype, not isinstance(agg, (exp.Count, exp.CountIf)), None, False)

    def _check_aggregate(self, agg: exp.Expression) -> None:
        if any(_aggregates_in(child) for child in aggregate_function(agg).iter_expressions()):
            raise self.error(f"aggregate inside an aggregate: {show(agg)}", agg)

    # -- ORDER BY / LIMIT -------------------------------------------------------------------------------------

    def _order_limit(
        self, q: exp.Expression, node: Node, select: tuple[list[exp.Expression], Scope] | None
    ) -> Node:
        order, limit = q.args.get("order"), q.args.get("limit")
        offset = q.args.get("offset")
        if order is not None and select is not None:
            projections, scope = select
            aliases = {p.alias_or_name.lower() for p in projections}
            for o in order.expressions:
                key = o.this
                if isinstance(key, exp.Literal) or (
                    isinstance(key, exp.Column) and not key.table and key.name.lower() in aliases
                ):
                    continue
                if not _aggregates_in(key):
                    self.bind(key, scope)
        if limit is None and offset is None:
            if order is not None:
                self.notes.append(
                    "ORDER BY without LIMIT is ignored: a view is a set of rows, not a sequence"
                )
            return node
        return Limit(
            fields=node.fields,
            child=node,
            order=tuple(o.sql("spark") for o in order.expressions) if order is not None else (),
            limit=limit.expression.sql("spark") if limit is not None else None,
            offset=offset.expression.sql("spark") if offset is not None else None,
        )

    # -- expressions ------------------------------------------------------------------------------------------

    def _expand_stars(self, q: exp.Select, scope: Scope) -> list[exp.Expression]:
        out: list[exp.Expression] = []
        for p in q.expressions:
            if isinstance(p, exp.Star):
                if not scope.relations:
                    raise self.error("SELECT * needs a FROM clause", q)
                seen_using = set()
                for name, merged in scope.using.items():
                    out.append(_alias(_marker(merged), _field_name(merged)))
                    seen_using.add(name)
                for alias, node in scope.relations:
                    for f in node.fields:
                        if f.name.lower() in seen_using:
                            continue
                        out.append(exp.column(f.name, table=alias, quoted=True))
            elif isinstance(p, exp.Column) and isinstance(p.this, exp.Star):
                found = scope.find(p.table)
                if found is None:
                    raise self.error(
                        f"unknown table alias {p.table!r} in {p.table}.*",
                        p,
                        hint=did_you_mean(p.table, [a for a, _ in scope.relations], "aliases"),
                    )
                out.extend(exp.column(f.name, table=p.table, quoted=True) for f in found.fields)
            else:
                out.append(p)
        return out

    def _output_fields(
        self,
        projections: list[exp.Expression],
        bound: list[exp.Expression],
        names_required: bool,
        q: exp.Select,
    ) -> tuple[Field, ...]:
        fields: list[Field] = []
        for p, b in zip(projections, bound):
            name = spark_name(p)  # its alias, or the name Spark gives it
            value = _unalias(b)
            column = isinstance(value, exp.Column)
            time_attr = column and bool(value.meta.get("time_attr"))
            window_bound = value.meta.get("window_bound") if column else None
            fields.append(
                Field(name, infer_type(value), infer_nullable(value), None, time_attr, window_bound)
            )
        if names_required:
            seen: dict[str, int] = {}
            for i, f in enumerate(fields):
                if f.name.lower() in seen:
                    raise self.error(
                        f"column name {show_name(f.name)} is used twice (columns {seen[f.name.lower()] + 1} "
                        f"and {i + 1})",
                        projections[i],
                        hint="give one of them another name with AS",
                    )
                seen[f.name.lower()] = i
        return tuple(fields)

    def _resolve(self, name: str, table: str | None, scope: Scope, at: exp.Expression) -> exp.Expression:
        return resolve(name, table, scope, at, self.error)

    def bind(self, e: exp.Expression, scope: Scope, aggregates: bool = False) -> exp.Expression:
        """A copy of `e` whose columns are resolved in `scope` (typed, quoted, qualified by FROM alias)."""
        e = e.copy().transform(_processing_time)
        if isinstance(e, exp.Column) and e.meta.get("bound"):
            return e
        replacements = []
        for node in e.walk(prune=lambda n: isinstance(n, exp.Query)):
            if (
                isinstance(node, exp.Column)
                and not node.meta.get("bound")
                and not isinstance(node.this, exp.Star)
            ):
                replacements.append(node)
            elif isinstance(node, exp.Query) and id(node) != id(e):
                self.query(node, scope, self.ctes, names_required=False)  # to check its names and inputs
            elif isinstance(node, exp.AggFunc) and not aggregates and not in_window(node):
                raise self.error(
                    f"aggregate {show(node)} is not allowed here",
                    node,
                    hint="aggregates belong in SELECT and HAVING of a grouped query",
                )
        for column in replacements:
            bound = self._resolve(column.name, column.table or None, scope, column)
            if "line" in column.this.meta:  # keep the position, for errors found later (e.g. GROUP BY checks)
                bound.meta.update(
                    {k: v for k, v in column.this.meta.items() if k in ("line", "col", "start", "end")}
                )
            if column is e:
                return bound
            column.replace(bound)
        if aggregates:
            for agg in e.find_all(exp.AggFunc):
                inner = agg.this.expressions[0] if isinstance(agg.this, exp.Distinct) else agg.this
                if isinstance(inner, exp.Expression) and not isinstance(inner, exp.Star):
                    inner.type = infer_type(inner)
                result = aggregate_type(agg, inner.type if isinstance(inner, exp.Expression) else None)
                if result is not None:
                    agg.type = result
        return e


# -- helpers ------------------------------------------------------------------------------------------------------


MTIME = "_mtime"  # incremental/zset.MTIME: every change row's commit time (not imported: no pyspark here)


def _is_processing_time(time: exp.Expression, scope: Scope) -> bool:
    """Whether bound `time` is a column of a relation of `scope` that passes PROCTIME() through unchanged (as
    `(SELECT *, PROCTIME() AS p_time FROM bid) b` gives `b.p_time`)."""
    if not isinstance(time, exp.Column):
        return False
    relation, column = scope.find(time.table), time
    while relation is not None and isinstance(column, exp.Column) and not column.meta.get("proctime"):
        name = column.name  # (a field is qualified by its relation's alias outside it, by its own inside)
        position = next((i for i, f in enumerate(relation.fields) if f.name == name), None)
        if position is None:
            return False
        if isinstance(relation, Filter):
            relation = relation.child
        elif isinstance(relation, Project) and isinstance(
            projected := relation.projections[position], exp.Column
        ):
            column, relation = projected, relation.child
        else:
            return False
    return bool(column.meta.get("proctime"))


def _processing_time(e: exp.Expression) -> exp.Expression:
    """PROCTIME() (seed 004): the time the batch took the row in, i.e. the commit time of the input change that
    brought it, which every change row carries as `_mtime`."""
    if not (isinstance(e, exp.Anonymous) and str(e.this).lower() == "proctime" and not e.expressions):
        return e
    column = exp.column(MTIME, quoted=True)
    column.type = build("TIMESTAMP")
    column.meta.update({"bound": True, "nullable": False, "proctime": True})
    return column


def _marker(e: exp.Expression) -> exp.Expression:
    e = e.copy()
    for column in e.find_all(exp.Column):
        column.meta["bound"] = True
    return e


def _field_name(e: exp.Expression) -> str:
    return e.name if isinstance(e, exp.Column) else next(e.find_all(exp.Column)).name


def source_position(at: exp.Expr | None) -> tuple[int | None, int | None]:
    if at is None:
        return None, None
    for node in at.walk():
        meta = node.meta if isinstance(node, exp.Expression) else {}
        if "line" in meta:
            # sqlglot records the column of a token's last character; point at its first.
            col = meta.get("col")
            if col is not None and "start" in meta and "end" in meta:
                col -= meta["end"] - meta["start"]
            return meta["line"], col
    return None, None


def _first_words(e: exp.Expr) -> str:
    text = e.sql("spark")
    return text if len(text) <= 60 else text[:57] + "..."


def _is_aggregate(e: exp.Expression) -> bool:
    """An aggregate call (with its FILTER clause and IGNORE / RESPECT NULLS, if any), not the function of a
    window."""
    if isinstance(e, exp.AggFunc) and isinstance(e.parent, (exp.Filter, *NULLS_OPTIONS)):
        return False  # part of the call above
    if isinstance(e, NULLS_OPTIONS) and isinstance(e.parent, exp.Filter):
        return False
    return isinstance(aggregate_function(e), exp.AggFunc) and not in_window(e)


def _aggregates_in(e: exp.Expression) -> bool:
    return any(
        isinstance(n, exp.AggFunc) and not in_window(n)
        for n in e.walk(prune=lambda n: isinstance(n, exp.Query))
    )


def _named_windows(q: exp.Select) -> exp.Select:
    """The SELECT with `OVER w` of a `WINDOW w AS (...)` clause written out in each window."""
    named = {w.name.lower(): w for w in q.args.get("windows") or []}
    if not named:
        return q
    q = q.copy()
    for window in q.find_all(exp.Window):
        alias = window.args.get("alias")
        spec = named.get(alias.name.lower()) if isinstance(alias, exp.Identifier) else None
        if spec is None:
            continue
        window.set("alias", None)
        for part in ("partition_by", "order", "spec"):
            if not window.args.get(part) and spec.args.get(part):
                window.set(
                    part,
                    spec.args[part].copy()
                    if isinstance(spec.args[part], exp.Expression)
                    else [p.copy() for p in spec.args[part]],
                )
    q.set("windows", None)
    return q


def _has_modifiers(q: exp.Expression) -> bool:
    return any(q.args.get(k) is not None for k in ("order", "limit", "offset", "with_", "with"))


def _unalias(e: exp.Expression) -> exp.Expression:
    return e.this if isinstance(e, exp.Alias) else e


def _realias(original: exp.Expression, value: exp.Expression) -> exp.Expression:
    return _alias(value, original.alias) if isinstance(original, exp.Alias) else value


def _alias(e: exp.Expression, name: str) -> exp.Alias:
    """`e AS name`, the name quoted."""
    return exp.Alias(this=e, alias=exp.to_identifier(name, quoted=True))


def _resolve_aliases(e: exp.Expression, aliases: dict[str, exp.Expression], scope: Scope) -> exp.Expression:
    """HAVING may name SELECT aliases (Spark allows it) where no FROM column has that name."""
    columns = {c.lower() for c in scope.columns()}
    e = e.copy()
    for column in list(e.find_all(exp.Column)):
        if not column.table and column.name.lower() in aliases and column.name.lower() not in columns:
            replacement = aliases[column.name.lower()].copy()
            if column is e:
                return replacement
            column.replace(replacement)
    return e


def _flatten_grouping(items: list[exp.Expression]) -> list[exp.Expression]:
    """The columns of GROUP BY, with ROLLUP / CUBE / GROUPING SETS opened up (their view is planned in full)."""
    flat: list[exp.Expression] = []
    for item in items:
        if isinstance(item, (exp.Rollup, exp.Cube, exp.GroupingSets, exp.Tuple, exp.Paren)):
            inner = [item.this] if isinstance(item, exp.Paren) else item.expressions
            flat.extend(_flatten_grouping(inner))
        elif not any(item == f for f in flat):
            flat.append(item)
    return flat


def _group_names(groups: list[exp.Expression]) -> list[str]:
    names: list[str] = []
    for i, g in enumerate(groups):
        name = g.name if isinstance(g, exp.Column) else f"_g{i}"
        names.append(name if name.lower() not in {n.lower() for n in names} else f"_g{i}")
    return names
