"""The project's declarations: every source and view in views/*.sql, their DAG, and a plan for every view."""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
from sqlglot import exp

from mvengine.config import Config
from mvengine.errors import ConfigError, SqlError
from mvengine.names import did_you_mean
from mvengine.plan.nodes import Field
from mvengine.plan.scope import Relation
from mvengine.plan.view_plan import ViewPlan, plan_view
from mvengine.project.catalog_tables import CatalogTables, read_catalog_tables
from mvengine.project.dag import build_dag, check_acyclic, topological_order
from mvengine.project.eager_aggregates import SourceTypes, rewrite_eager_aggregates
from mvengine.project.exists_keys import rewrite_exists_keys
from mvengine.project.join_inputs import extract_join_inputs
from mvengine.project.not_in import rewrite_not_in
from mvengine.project.scalar_subqueries import Columns, rewrite_scalar_subqueries
from mvengine.sql.expectations import kept_rows
from mvengine.sql.files import Statement, read_sql_files
from mvengine.sql.sources import SourceDef, is_source, parse_source
from mvengine.sql.views import ViewDef, is_view, parse_view


@dataclass(frozen=True)
class Catalog:
    sources: dict[str, SourceDef]
    views: dict[str, ViewDef]
    graph: nx.DiGraph
    order: list[str]  # sources and views, every one after what it reads
    plans: dict[str, ViewPlan]

    def find(self, name: str) -> str | None:
        """The declared spelling of a source or view name (names are case-insensitive), or None."""
        return next((n for n in self.graph.nodes if n.lower() == name.lower()), None)

    def require(self, names: list[str]) -> list[str]:
        """The declared names of `names`, or an error with a suggestion for the first unknown one."""
        found = []
        for name in names:
            hit = self.find(name)
            if hit is None:
                raise ConfigError(
                    f"no source or view named {name!r} in views/",
                    hint=did_you_mean(name, list(self.graph.nodes), "sources and views"),
                )
            found.append(hit)
        return found

    def views_to_refresh(self, names: list[str] | None) -> list[ViewPlan]:
        """The named views (default: all) and every view they read, in DAG order."""
        if not names:
            return [self.plans[n] for n in self.order if n in self.plans]
        wanted: set[str] = set()
        for name in self.require(names):
            if name not in self.plans:
                raise ConfigError(
                    f"{name} is a source, not a view", hint="mv refresh VIEW ...; sources need no refresh"
                )
            wanted.add(name)
            wanted.update(a for a in nx.ancestors(self.graph, name) if a in self.plans)
        return [self.plans[n] for n in self.order if n in wanted]


def load_sources(config: Config, tables: CatalogTables | None = None) -> dict[str, SourceDef]:
    """Sources by name, in declaration order (views are parsed and checked too, but not planned), with the
    catalog tables the views read by name (`tables` locates them; None: only those located before)."""
    tables = tables or CatalogTables(config, None)
    sources, _ = read_catalog_tables(*_declarations(config, tables), tables)
    return sources


def load_catalog(config: Config, tables: CatalogTables | None = None) -> Catalog:
    """Parse, resolve and plan everything in views/; the first mistake found is raised as a SqlError. Tables of
    Spark's catalog that views read by name are located by `tables` (None: only those located before)."""
    tables = tables or CatalogTables(config, None)
    sources, views = read_catalog_tables(*_declarations(config, tables), tables)
    columns = _columns_known(sources, views)
    views = rewrite_exists_keys(rewrite_not_in(views, columns), columns)
    views = rewrite_scalar_subqueries(views, columns)
    views = rewrite_eager_aggregates(views, columns, _source_types(sources))
    views = extract_join_inputs(views, set(sources) | set(views), config.warehouse)
    graph = build_dag(list(sources), list(views.values()))
    check_acyclic(graph, views)
    order = topological_order(graph)
    relations = {name.lower(): source_relation(source) for name, source in sources.items()}
    known = list(graph.nodes)
    plans: dict[str, ViewPlan] = {}
    for name in order:
        if name not in views:
            continue
        plan = plan_view(views[name], lambda n: relations.get(n.lower()), known)
        if config.require_bounded_state and not plan.bounded_state:
            view = views[name]
            raise SqlError(
                f"its state grows without bound ({plan.state})",
                file=view.file,
                line=view.line,
                obj=f"view {name}",
                hint="bound it (e.g. a time predicate on an event-time column), or set "
                "[plan] require_bounded_state = false in conf/mvengine.toml",
            )
        plans[name] = plan
        relations[name.lower()] = plan.relation()
    return Catalog(sources, views, graph, order, plans)


def _columns_known(sources: dict[str, SourceDef], views: dict[str, ViewDef]) -> Columns:
    """The column names of a source or view by its name, before planning: a view's from its column list or its
    SELECT list (None when that has a `*`)."""
    by_name: dict[str, set[str] | None] = {
        n.lower(): {c.lower() for c in s.schema.names} for n, s in sources.items()
    }
    for name, view in views.items():
        names = [c.lower() for c in (view.column_names or view.query.named_selects)]
        by_name[name.lower()] = None if "*" in names else set(names)
    return lambda name: by_name.get(name.lower())


def _source_types(sources: dict[str, SourceDef]) -> SourceTypes:
    """A source's column types by lower-case column name, and its key, by the source's name (None for a view)."""
    by_name = {
        n.lower(): ({f.name.lower(): t for f, t in zip(s.schema, s.sql_types)}, s.key)
        for n, s in sources.items()
    }
    return lambda name: by_name.get(name.lower())


def source_relation(source: SourceDef) -> Relation:
    time_attr = source.watermark.column if source.watermark else None
    fields = tuple(
        Field(f.name, t, f.nullable, source.name, f.name == time_attr)
        for f, t in zip(source.schema, source.sql_types)
    )
    key = None if source.key is None else tuple(source.schema.names.index(k) for k in source.key)
    return Relation(source.name, "source", fields, key, source.append_only, kept_rows(source.expectations))


def _declarations(config: Config, tables: CatalogTables) -> tuple[dict[str, SourceDef], dict[str, ViewDef]]:
    if not config.views_dir.is_dir():
        raise ConfigError(
            f"no views/ folder in {config.project_dir}",
            hint="run mv from a project folder (one holding conf/ and views/) or pass --project DIR",
        )
    sources: dict[str, SourceDef] = {}
    views: dict[str, ViewDef] = {}
    places: dict[str, tuple[str, int]] = {}
    for statement in read_sql_files(config.views_dir, config.project_dir):
        if is_source(statement):
            declared: SourceDef | ViewDef = parse_source(statement, config, tables.table)
            kind = "source"
        elif is_view(statement):
            declared = parse_view(statement, config)
            kind = "view"
        else:
            raise _unsupported(statement)
        first = places.get(declared.name.lower())
        if first is not None:
            raise SqlError(
                f"{declared.name!r} is already declared at {first[0]}:{first[1]}",
                file=declared.file,
                line=declared.line,
                obj=f"{kind} {declared.name}",
                hint="sources and views share one namespace (case-insensitive): rename one of them",
            )
        places[declared.name.lower()] = (declared.file, declared.line)
        if kind == "source":
            sources[declared.name] = declared  # type: ignore[assignment]
        else:
            views[declared.name] = declared  # type: ignore[assignment]
    return sources, views


def _unsupported(statement: Statement) -> SqlError:
    tree = statement.tree
    words = " ".join(statement.text.split()[:3])
    hint = "views/ holds CREATE TABLE (sources) and CREATE MATERIALIZED VIEW statements only"
    if isinstance(tree, exp.Create) and tree.kind == "VIEW":
        hint = "write CREATE MATERIALIZED VIEW: mvengine keeps materialized views"
    elif isinstance(tree, exp.Query):
        hint = "wrap the query in CREATE MATERIALIZED VIEW name AS ...; use `mv query` for ad-hoc queries"
    return SqlError(f"unsupported statement {words} ...", file=statement.file, line=statement.line, hint=hint)
