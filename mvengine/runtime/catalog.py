"""Spark's catalog, asked and written: where a table a view reads by name is (project/catalog_tables.py keeps
the answers), and every view's snapshot and changelog registered as `<schema>.<view>` and
`<schema>.<view>_changelog` ([catalog] in conf/mvengine.toml), so that any Spark session on the same metastore
reads them by name.

Only here does mvengine touch the metastore: its client takes ~7 s to start, so a refresh asks it only for what
the record does not have yet (a new view, a name never located), and one whose batches all run on the driver
starts no Spark for it afterwards. A registered table is an external table over the view's Delta table: the
catalog holds its location, and Delta's log its columns and history, so a view redefined with other columns
needs no new registration, and dropping the catalog's table leaves the view's data."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mvengine.config import Config, derby_database
from mvengine.errors import MvError
from mvengine.project.catalog_tables import CatalogMiss, CatalogTables, Locate
from mvengine.project.layout import view_tables
from mvengine.storage.objects import is_local, local_path
from mvengine.storage.tables import TableRef

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from mvengine.plan.view_plan import ViewPlan

METASTORE_HINT = (
    "the embedded Derby metastore (<warehouse>/_catalog) opens in one process at a time: stop the other mv "
    "or Spark process that uses it, or share a metastore service ([spark.conf] spark.hadoop.hive.metastore.uris)"
)


def catalog_tables(
    config: Config,
    spark: Callable[[], SparkSession] | None = None,
    *,
    fresh: bool = False,
    own: bool | None = None,
) -> CatalogTables:
    """The project's catalog names, located in the Spark `spark()` gives (default: this process's, started on
    first need, on the project's settings: `own`); `fresh`: located anew, not taken from the record (mv refresh
    --full)."""
    own = spark is None if own is None else own
    if spark is None:

        def spark() -> SparkSession:
            from mvengine.runtime.session import spark_session

            return spark_session(config)

    metastore = _embedded_metastore(config) if own else None
    return CatalogTables(config, locator(spark, metastore), fresh=fresh)


def locator(spark: Callable[[], SparkSession], metastore: str | None = None) -> Locate:
    """`locate(name)` in the catalog of the session `spark()` gives. `metastore`: the folder of the embedded
    Derby metastore that session uses: while there is none, the session catalog has no table, and a name in it
    is answered without starting Spark (which would make the metastore: a mistyped name writes nothing)."""

    def locate(name: str) -> str | CatalogMiss:
        if metastore is not None and name.count(".") == 1 and not os.path.exists(metastore):
            return CatalogMiss(
                f"there is no such table in Spark's catalog (it has no metastore yet: {metastore})"
            )
        info = _describe(spark(), name)
        if info is None:
            return CatalogMiss("there is no such table in Spark's catalog")
        if info.get("Type", "").upper() == "VIEW":
            return CatalogMiss("it is a view of the catalog, not a table: a view reads Delta tables")
        provider = info.get("Provider", "")
        if provider.lower() != "delta" or not info.get("Location"):
            return CatalogMiss(
                f"it is a {provider or 'non-Delta'} table, not a Delta table (convert it with CONVERT TO DELTA)"
            )
        return _uri(info["Location"])

    return locate


def register_views(
    config: Config, tables: CatalogTables, plans: list[ViewPlan], spark: Callable[[], SparkSession]
) -> list[str]:
    """Register the snapshot and changelog of each view of `plans` that has committed, where the record says
    they are not yet; returns a warning per table that could not be (a table of that name elsewhere)."""
    if not config.catalog_register:
        return []
    wanted: dict[str, str] = {}
    for plan in plans:
        if plan.view.origin is not None:
            continue  # a join input made a view of its own: mvengine's, not the user's
        tables_of = view_tables(plan, config.storage_options)
        for name, ref in ((plan.name, tables_of.snapshot), (f"{plan.name}_changelog", tables_of.changelog)):
            wanted[f"{config.catalog_schema}.{name}".lower()] = ref.uri
    missing = {n: uri for n, uri in wanted.items() if tables.registered.get(n) != uri}
    missing = {n: uri for n, uri in missing.items() if TableRef(uri, config.storage_options).exists()}
    if not missing or not _outlives(config.spark_conf, config.catalog_schema):
        return []  # (decided before Spark starts: the project's own settings)
    session = spark()
    if not _outlives(session.conf, config.catalog_schema):
        return []  # (a session given to the project, as in tests: its own)
    warnings: list[str] = []
    _ensure_schema(session, config.catalog_schema)
    for name, uri in missing.items():
        info = _describe(session, name)
        if info is not None and _uri(info.get("Location", "")) != uri:
            if _registered_elsewhere(info, config):
                warnings.append(
                    f"{name} is already a table of the catalog, at {info.get('Location')}: not registered (set "
                    "[catalog] schema to a schema of this project's own, or DROP TABLE it)"
                )
                continue
            session.sql(f"DROP TABLE {_quoted(name)}")  # an external table whose data is gone: only its entry
            info = None
        if info is None:
            location = uri.replace("'", "\\'")
            session.sql(f"CREATE TABLE {_quoted(name)} USING delta LOCATION '{location}'")
        tables.register(name, uri)
    return warnings


def _embedded_metastore(config: Config) -> str | None:
    """The folder of the embedded Derby metastore the project's settings give Spark (config.metastore_defaults),
    or None for any other catalog."""
    if config.spark_conf.get("spark.sql.catalogImplementation") != "hive":
        return None
    if "spark.hadoop.hive.metastore.uris" in config.spark_conf:
        return None
    return derby_database(config.spark_conf)


def _outlives(settings: Any, schema: str) -> bool:
    """Whether what is registered in `schema` outlives the process, by the Spark `settings` (a dict or a
    session's conf): a schema of another catalog than Spark's session catalog (Unity Catalog, Glue ...), or the
    session catalog on a Hive metastore (not in memory)."""
    if "." in schema and schema.split(".")[0].lower() != "spark_catalog":
        return True
    return settings.get("spark.sql.catalogImplementation", "in-memory") == "hive"


def _ensure_schema(session: SparkSession, schema: str) -> None:
    if not session.catalog.databaseExists(schema):
        session.sql(f"CREATE SCHEMA IF NOT EXISTS {_quoted(schema)}")


def _registered_elsewhere(info: dict[str, str], config: Config) -> bool:
    """Whether a catalog table in the way is another's: anything but an external table whose folder holds no
    Delta table anymore (left by a project since deleted, or a warehouse moved)."""
    if info.get("Type", "").upper() != "EXTERNAL":
        return True
    return TableRef(_uri(info.get("Location", "")), config.storage_options).exists()


def _describe(session: SparkSession, name: str) -> dict[str, str] | None:
    """DESCRIBE TABLE EXTENDED's detail rows of the catalog's table `name` (Type, Provider, Location ...): the
    metastore's entry, no read of the table. None when there is no such table."""
    from pyspark.errors import AnalysisException

    try:
        rows = session.sql(f"DESCRIBE TABLE EXTENDED {_quoted(name)}").collect()
    except AnalysisException as e:
        if "TABLE_OR_VIEW_NOT_FOUND" in str(e) or "SCHEMA_NOT_FOUND" in str(e):
            return None
        if "metastore" in str(e).lower() or "derby" in str(e).lower():
            raise MvError(
                f"cannot open Spark's catalog to read {name}: {str(e).splitlines()[0]}", hint=METASTORE_HINT
            ) from None
        raise
    return {r["col_name"]: r["data_type"] for r in rows}


def _quoted(name: str) -> str:
    return ".".join(f"`{part}`" for part in name.split("."))


def _uri(location: str) -> str:
    """A catalog's location as mvengine writes paths: a local folder without `file:`, else the URI."""
    if is_local(location):
        return os.path.normpath(local_path(location))
    return location
