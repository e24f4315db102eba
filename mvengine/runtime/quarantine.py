"""`mv validate` and `mv quarantine`: expectations run on whole tables, and the rows QUARANTINE refused shown and
replayed (docs/guides/expectations.md).

Replaying is for rows repaired where they wait: a source's quarantined rows, edited in the quarantine table (or
left as they are, after the expectation was relaxed), that now pass every expectation that drops rows are
written back into the source (upserted by its PRIMARY KEY, replacing the bad row; or appended, the bad original
staying in the source, dropped), and leave the quarantine. A view's quarantined rows are derived:
they come back by themselves when the view's expectation is relaxed (the view is recomputed), so a replay only
removes those that pass now.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from mvengine.config import Config
from mvengine.errors import MvError
from mvengine.project.catalog import Catalog
from mvengine.project.layout import source_quarantine, source_table, view_tables
from mvengine.runtime.expectations import Outcome, Validator
from mvengine.sql.expectations import Expectation
from mvengine.storage.tables import TableRef, is_committed

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

QUARANTINE_COLUMNS = ("_expectation", "_version", "_batch")  # what a quarantine row adds to the table's row


@dataclass
class Replayed:
    table: str
    replayed: int  # rows written back (a source) or removed as passing now (a view)
    kept: int  # rows still failing, left in the quarantine


def declared(catalog: Catalog, name: str) -> tuple[str, str, tuple[Expectation, ...]]:
    """The declared spelling of `name`, its kind ("source" or "view") and its expectations."""
    found = catalog.find(name)
    if found is None:
        catalog.require([name])  # the error, with a suggestion
    assert found is not None
    if found in catalog.sources:
        return found, "source", catalog.sources[found].expectations
    return found, "view", catalog.plans[found].view.expectations


def quarantine_table(config: Config, catalog: Catalog, name: str) -> TableRef:
    name, kind, _ = declared(catalog, name)
    if kind == "source":
        return source_quarantine(config.warehouse, name, config.storage_options)
    return view_tables(catalog.plans[name], config.storage_options).quarantine


def quarantined(config: Config, catalog: Catalog, name: str) -> pa.Table | None:
    """The rows in the table's quarantine (None when it has none yet), read by delta-rs: no Spark."""
    ref = quarantine_table(config, catalog, name)
    return ref.open().to_pyarrow_table() if ref.exists() else None


def validate(
    config: Config, catalog: Catalog, names: list[str], spark: Callable[[], SparkSession]
) -> list[Outcome]:
    """Every expectation of the named sources and views (default: all that declare any) on their current
    tables: a view's snapshot (whose dropped rows are already gone), a source as its owner wrote it."""
    wanted = (
        [declared(catalog, n) for n in names]
        if names
        else [
            *[(n, "source", s.expectations) for n, s in catalog.sources.items() if s.expectations],
            *[(n, "view", p.view.expectations) for n, p in catalog.plans.items() if p.view.expectations],
        ]
    )
    validator = Validator()
    outcomes: list[Outcome] = []
    for name, kind, expectations in wanted:
        if not expectations:
            continue
        ref = (
            source_table(catalog.sources[name], config.storage_options)
            if kind == "source"
            else view_tables(catalog.plans[name], config.storage_options).snapshot
        )
        if not ref.exists():
            raise MvError(
                f"{kind} {name} has no table yet ({ref.uri})",
                hint="mv refresh creates the views' tables (and mv sources --create the sources')",
            )
        dt = ref.open()
        rows: object = None
        if validator.suite(name, expectations)[2] or _rows(dt) > config.policy.validate_on_driver:
            from mvengine.storage.api import read_table

            rows = read_table(spark(), ref)
        else:
            rows = dt.to_pyarrow_table()
        outcomes += validator.validate(name, expectations, rows)
    return outcomes


def replay(config: Config, catalog: Catalog, name: str, spark: Callable[[], SparkSession]) -> Replayed:
    """Write the source's quarantined rows that pass its expectations now back into it (once, even when
    interrupted and run again), and keep the others; for a view, drop those that pass now."""
    from deltalake import write_deltalake

    from mvengine.storage.api import merge_into, write_table

    name, kind, expectations = declared(catalog, name)
    ref = quarantine_table(config, catalog, name)
    if not ref.exists():
        return Replayed(name, 0, 0)
    dt = ref.open()
    version = dt.version()
    rows = dt.to_pyarrow_table()
    data = rows.drop_columns(list(QUARANTINE_COLUMNS))
    dropping = tuple(e for e in expectations if e.drops)
    failing: set[int] = set()
    validator = Validator()
    if dropping and data.num_rows and validator.suite(name, dropping)[2]:
        failing = _failing_in_spark(spark(), data, dropping)  # a predicate only GX's Spark engine checks
    elif dropping and data.num_rows:
        for o in validator.validate(name, dropping, data):
            failing.update(o.indices or [])
    passing = [i for i in range(rows.num_rows) if i not in failing]
    if not passing:
        return Replayed(name, 0, rows.num_rows)
    if kind == "source":
        source = catalog.sources[name]
        target = source_table(source, config.storage_options)
        app = f"mvengine:replay:{name}"
        if not is_committed(
            target, app, version
        ):  # a replay interrupted after this write does not write twice
            fixed = _once(data.take(pa.array(passing, pa.int64())), rows.take(pa.array(passing, pa.int64())))
            fixed = fixed.cast(source.schema)
            if source.key:
                merge_into(fixed, target, list(source.key), txn=(app, version), on_driver=True)
            else:
                write_table(fixed, target, txn=(app, version))
    kept = rows.filter(pa.array([i in failing for i in range(rows.num_rows)]))
    write_deltalake(ref.uri, kept, mode="overwrite", storage_options=config.storage_options or None)
    ref.committed()
    return Replayed(name, len(passing) if kind == "view" else _distinct(rows, passing), kept.num_rows)


def _failing_in_spark(spark, data: pa.Table, expectations: tuple[Expectation, ...]) -> set[int]:
    """The positions of the rows that fail any of the dropping `expectations`, by the condition the plan's
    filter keeps rows by (sql/expectations.kept_rows)."""
    from mvengine.sql.expectations import kept_rows

    numbered = data.append_column("_position", pa.array(range(data.num_rows), pa.int64()))
    kept = kept_rows(expectations)
    assert kept is not None  # the expectations drop rows
    failing = (
        spark.createDataFrame(numbered).where(f"NOT ({kept.sql('spark')})").select("_position").collect()
    )
    return {r[0] for r in failing}


def _once(data: pa.Table, rows: pa.Table) -> pa.Table:
    """One copy of each refused row: a row two expectations refused is in the quarantine twice, with the same
    `_version` and `_batch`."""
    seen: dict[str, int] = {}
    for i, (row, meta) in enumerate(zip(data.to_pylist(), rows.select(["_version", "_batch"]).to_pylist())):
        seen.setdefault(json.dumps([row, meta], sort_keys=True, default=str), i)
    return data.take(pa.array(sorted(seen.values()), pa.int64()))


def _distinct(rows: pa.Table, positions: list[int]) -> int:
    picked = rows.take(pa.array(positions, pa.int64()))
    return _once(picked.drop_columns(list(QUARANTINE_COLUMNS)), picked).num_rows


def _rows(dt) -> int:
    actions = pa.table(dt.get_add_actions(flatten=True))
    return (
        int(pc.sum(actions.column("num_records")).as_py() or 0)
        if "num_records" in actions.column_names
        else 0
    )
