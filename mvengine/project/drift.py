"""How the tables of a project's sources differ from their CREATE TABLE, after another writer changed their
columns (storage/sources.schema_drift), read from the Delta logs alone: no Spark, for `mv plan` too."""

from __future__ import annotations

from collections.abc import Iterable

from mvengine.project.catalog import Catalog
from mvengine.project.layout import source_table
from mvengine.storage.sources import SchemaDrift, schema_drift


def source_drifts(
    catalog: Catalog, names: Iterable[str], storage_options: dict[str, str]
) -> dict[str, SchemaDrift]:
    """How the columns of the named sources that another writer changed differ from their CREATE TABLE."""
    drifts = {}
    for name in names:
        source = catalog.sources[name]
        ref = source_table(source, storage_options)
        if ref.exists():
            drift = schema_drift(ref, source.schema)
            if drift.added or drift.breaks:
                drifts[name] = drift
    return drifts
