"""Tables of Spark's catalog that views read by name (`FROM sales.orders`), and the names mvengine gives the
views' own tables there.

A name is located once, by asking Spark's catalog (its metastore) where the Delta table is, and the location is
recorded in `<warehouse>/_pipeline/catalog.json` by the refresh that read it: later commands find it there and
start no Spark for it (the metastore's client takes ~7 s to start). The record belongs to one metastore (the
catalog settings of [spark.conf]); other settings ask again. A recorded location whose table is gone is asked
again too; a table moved in the catalog is seen by `mv refresh --full`.

A view's `FROM sales.orders` reads the source a `CREATE TABLE orders (...) WITH ('table' = 'sales.orders')`
declares, when there is one (it adds a key, a watermark or expectations); otherwise an undeclared source named
`sales_orders`, with the table's columns as they are (a column added to it rebuilds the views over it)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pyarrow as pa
from sqlglot import exp

from mvengine.config import Config, join_uri
from mvengine.errors import SqlError
from mvengine.plan.binder import source_position
from mvengine.project.layout import ViewTables
from mvengine.sql.sources import SourceDef
from mvengine.sql.types import arrow_type, delta_type_sql
from mvengine.sql.views import ViewDef
from mvengine.storage.objects import read_text, write_text
from mvengine.storage.tables import TableRef

# `locate(name)`: the location of the catalog's Delta table `name`, or an error message saying why there is none.
Locate = Callable[[str], "str | CatalogMiss"]
RECORD = "catalog.json"  # under <warehouse>/_pipeline (runtime/pipeline_files.py), beside the cut record
_SESSION_CATALOG = "spark_catalog"
# The [spark.conf] keys that say which catalog and metastore a name is looked up in.
_CATALOG_KEYS = (
    "spark.sql.catalog",  # (spark.sql.catalogImplementation too)
    "spark.sql.defaultCatalog",
    "spark.sql.warehouse.dir",
    "spark.hadoop.javax.jdo.",
    "spark.hadoop.hive.",
)


class CatalogMiss(str):
    """Why the catalog has no Delta table by a name, in words (what `Locate` returns instead of a location)."""


def catalog_name(table: exp.Table) -> str | None:
    """`sales.orders` for a FROM item `sales.orders` (or `spark_catalog.sales.orders`), `uc.sales.orders` for a
    table of another catalog, lower case; None for a plain name (a source, view or CTE of the project)."""
    if not table.args.get("db"):
        return None
    parts = [table.catalog, table.db, table.name]
    if parts[0].lower() == _SESSION_CATALOG:
        parts[0] = ""
    return ".".join(p.lower() for p in parts if p)


def metastore_identity(config: Config) -> str:
    """Which catalog and metastore the project's names are looked up in: a hash of the settings that choose them."""
    chosen = sorted((k, v) for k, v in config.spark_conf.items() if k.startswith(_CATALOG_KEYS))
    return hashlib.sha256(json.dumps(chosen).encode()).hexdigest()[:16]


class CatalogTables:
    """The catalog names a project reads and registers, with their locations: from the record, else asked of
    Spark's catalog (`locate`, which starts Spark; None: nothing may be asked, as in `mv status`)."""

    def __init__(self, config: Config, locate: Locate | None, *, fresh: bool = False) -> None:
        self.config = config
        self._locate = locate
        self._path = join_uri(config.warehouse, "_pipeline", RECORD)
        record = _read(self._path, config.storage_options)
        same = record.get("metastore") == metastore_identity(config)
        self.located: dict[str, str] = dict(record.get("tables", {})) if same and not fresh else {}
        self.registered: dict[str, str] = dict(record.get("registered", {})) if same else {}
        self._recorded = (dict(self.located), dict(self.registered))

    def location(self, name: str, where: dict[str, Any]) -> str:
        """Where the catalog's Delta table `name` is; a located SqlError (`where`) when it has none."""
        known = self.located.get(name)
        if known is not None and TableRef(known, self.config.storage_options).exists():
            return known
        if self._locate is None:
            raise SqlError(
                f"the catalog table {name} has not been located yet",
                **where,
                hint="run mv refresh (or mv plan) once: it asks Spark's catalog and records where the table is",
            )
        found = self._locate(name)
        if isinstance(found, CatalogMiss):
            raise SqlError(
                f"{name}: {found}",
                **where,
                hint="check the name (SHOW TABLES IN <schema> in Spark SQL), or the catalog settings in "
                "[spark.conf]; a CREATE TABLE with WITH ('path' = ...) reads a table by its folder instead",
            )
        self.located[name] = found
        return found

    def columns(
        self, name: str, location: str, where: dict[str, Any]
    ) -> tuple[pa.Schema, tuple[exp.DataType, ...]]:
        """The columns of the catalog's table as its Delta log has them now, as a CREATE TABLE declares them."""
        schema = json.loads(TableRef(location, self.config.storage_options).open().schema().to_json())
        fields, types = [], []
        for f in schema["fields"]:
            sql = delta_type_sql(f["type"])
            dtype = exp.DataType.build(sql, dialect="spark") if sql else None
            arrow = arrow_type(dtype) if dtype is not None else None
            if dtype is None or arrow is None:
                raise SqlError(
                    f"{name}: column {f['name']!r} has a type mvengine does not read ({json.dumps(f['type'])})",
                    **where,
                    hint=f"declare the columns the views read: CREATE TABLE <name> (...) WITH ('table' = '{name}')",
                )
            fields.append(pa.field(f["name"], arrow, nullable=f.get("nullable", True)))
            types.append(dtype)
        return pa.schema(fields), tuple(types)

    def table(
        self, name: str, where: dict[str, Any], *, columns: bool = True
    ) -> tuple[str, tuple[pa.Schema, tuple[exp.DataType, ...]] | None]:
        """Where the catalog's table is, and (`columns`) its columns now (sql/sources.py LocateTable)."""
        location = self.location(name, where)
        return location, self.columns(name, location, where) if columns else None

    def register(self, name: str, location: str) -> None:
        self.registered[name] = location

    def save(self) -> None:
        """Record what this process located and registered (a refresh does, once its batches committed)."""
        if (self.located, self.registered) == self._recorded:
            return
        record = {
            "metastore": metastore_identity(self.config),
            "tables": dict(sorted(self.located.items())),
            "registered": dict(sorted(self.registered.items())),
        }
        write_text(self._path, json.dumps(record, indent=1), self.config.storage_options)
        self._recorded = (dict(self.located), dict(self.registered))


def registered_names(config: Config, tables: ViewTables) -> list[str]:
    """The names a view's snapshot and changelog are registered under in Spark's catalog, by the record (no
    Spark asked): both, or none."""
    registered = CatalogTables(config, None).registered
    names = [n for n, uri in registered.items() if uri in (tables.snapshot.uri, tables.changelog.uri)]
    return sorted(names, key=lambda n: n.endswith("_changelog"))


def read_catalog_tables(
    sources: dict[str, SourceDef], views: dict[str, ViewDef], tables: CatalogTables
) -> tuple[dict[str, SourceDef], dict[str, ViewDef]]:
    """The sources and views with every `FROM schema.table` of a view read through a source: the one declared
    WITH ('table' = 'schema.table'), or a new undeclared one named `schema_table`, located in the catalog."""
    by_table = {s.catalog_table: s.name for s in sources.values() if s.catalog_table}
    taken = {n.lower(): n for n in [*sources, *views]}
    sources = dict(sources)
    rewritten: dict[str, ViewDef] = {}
    for name, view in views.items():
        if not any(catalog_name(t) for t in view.query.find_all(exp.Table)):
            rewritten[name] = view
            continue
        query = view.query.copy()
        for table in list(query.find_all(exp.Table)):
            wanted = catalog_name(table)
            if wanted is not None:
                by_table[wanted] = by_table.get(wanted) or _undeclared(
                    wanted, table, view, tables, sources, taken
                )
                _read_through(table, by_table[wanted])
        rewritten[name] = replace(view, query=query)
    return sources, rewritten


def _undeclared(
    wanted: str,
    table: exp.Table,
    view: ViewDef,
    tables: CatalogTables,
    sources: dict[str, SourceDef],
    taken: dict[str, str],
) -> str:
    """A source for a catalog table no CREATE TABLE declares, added to `sources`; its name."""
    line, col = source_position(table.args.get("catalog") or table.args.get("db"))
    where: dict[str, Any] = {
        "file": view.file,
        "line": line or view.line,
        "col": col,
        "obj": f"view {view.name}",
    }
    name = wanted.replace(".", "_")
    if name.lower() in taken:
        raise SqlError(
            f"FROM {wanted} reads the catalog table as the source {name}, but {taken[name.lower()]} is already "
            "a source or view of the project",
            **where,
            hint=f"declare it under a name of its own: CREATE TABLE <name> WITH ('table' = '{wanted}')",
        )
    location = tables.location(wanted, where)
    schema, types = tables.columns(wanted, location, where)
    sources[name] = SourceDef(
        name,
        view.file,
        line or view.line,
        schema,
        types,
        location,
        key=None,
        append_only=False,
        watermark=None,
        path_declared=True,
        catalog_table=wanted,
    )
    taken[name.lower()] = name
    return name


def _read_through(table: exp.Table, source: str) -> None:
    """Make the FROM item `schema.table [AS a]` read `source AS a` (the alias defaults to the table's name, so
    that `orders.amount` still means its column)."""
    if not table.alias:
        table.set("alias", exp.TableAlias(this=exp.to_identifier(table.name)))
    table.set("this", exp.to_identifier(source))
    table.set("db", None)
    table.set("catalog", None)


def _read(path: str, storage_options: dict[str, str]) -> dict[str, Any]:
    try:
        record = json.loads(read_text(path, storage_options) or "{}")
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}
