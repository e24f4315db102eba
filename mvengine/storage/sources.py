"""Source tables: created on first use with the change data feed on, checked on every later use, and compared with
their CREATE TABLE when another writer changed their columns."""

from __future__ import annotations

import os
from dataclasses import dataclass

import pyarrow as pa

from mvengine.errors import StorageError
from mvengine.storage.tables import TableRef, create_table, require_cdf
from mvengine.storage.types import spark_compatible_schema


def ensure_source_table(
    ref: TableRef,
    schema: pa.Schema,
    *,
    declared_at: str = "",
    create: bool = True,
    path_declared: bool = False,
) -> bool:
    """Create the table when missing (returns True; with `create` false, only check that it can be: nothing
    but an empty folder at its path); otherwise check its CDF and columns (returns False). A table at a path
    the user declared (`path_declared`) is never created here: a missing one is an error that names the
    nearest folder there is (`mv sources --create` creates it on purpose). `declared_at` (file:line of its
    CREATE TABLE) locates the errors. Its columns are compared by `schema_drift`, not here: a column another
    writer added or dropped stops no view but those that read the source (runtime/refresh_plan.py)."""
    if not ref.exists():
        if path_declared:
            raise StorageError(
                f"{declared_at + ': ' if declared_at else ''}{ref.label}: there is no Delta table at "
                f"the declared 'path'{_nearest_folder(ref.uri)}; nothing was written",
                hint="correct the source's 'path', or create an empty table there on purpose with "
                "mv sources --create",
            )
        local = ref.uri.removeprefix("file://")
        if "://" not in local and os.path.isdir(local) and os.listdir(local):
            raise StorageError(
                f"{declared_at + ': ' if declared_at else ''}{ref.label}: the folder holds files but "
                "no Delta table (no _delta_log)",
                hint="point the source's 'path' at a Delta table, or at an empty or missing folder "
                "for mvengine to create the table in; convert Parquet data to Delta first",
            )
        if create:
            create_table(ref, schema)
        return create
    dt = ref.open()
    require_cdf(ref, dt)
    return False


@dataclass(frozen=True)
class SchemaDrift:
    """How a source table's columns differ from its CREATE TABLE, after another writer changed them: columns
    it added are ignored (every read takes the declared columns); a declared column it dropped or retyped
    stops the views over the source, located (`problem`)."""

    source: str
    version: int
    added: tuple[str, ...] = ()  # columns the table has and the CREATE TABLE does not declare
    missing: tuple[str, ...] = ()  # declared columns the table no longer has
    retyped: tuple[tuple[str, str, str], ...] = ()  # (column, its type in the table, its declared type)

    @property
    def breaks(self) -> bool:
        return bool(self.missing or self.retyped)

    def problem(self) -> str:
        """What stops the views over the source, in words."""
        return "; ".join(
            [f"declared column {n} is missing" for n in self.missing]
            + [f"column {n} is {have}, declared {want}" for n, have, want in self.retyped]
        )


def schema_drift(ref: TableRef, schema: pa.Schema) -> SchemaDrift:
    """How the table's columns at its latest version differ from the declared `schema` (by Spark's types)."""
    dt = ref.open()
    have = {f.name: f.type for f in spark_compatible_schema(pa.schema(dt.schema().to_arrow()))}
    declared = {f.name: f.type for f in spark_compatible_schema(schema)}
    return SchemaDrift(
        ref.name or ref.uri,
        dt.version(),
        added=tuple(n for n in have if n not in declared),
        missing=tuple(n for n in declared if n not in have),
        retyped=tuple((n, str(have[n]), str(t)) for n, t in declared.items() if n in have and have[n] != t),
    )


def require_declared_columns(ref: TableRef, schema: pa.Schema, *, declared_at: str = "") -> None:
    """Refuse a table whose columns are not exactly the declared ones, for what writes the declared columns
    into it (`mv load`)."""
    drift = schema_drift(ref, schema)
    differences = [f"column {n} is not declared" for n in drift.added]
    if drift.breaks:
        differences.append(drift.problem())
    if differences:
        raise StorageError(
            f"{declared_at + ': ' if declared_at else ''}{ref.label} (version {drift.version}) no longer has the "
            f"declared columns: {'; '.join(differences)}; nothing was written",
            hint="another writer changed the table's columns: make the CREATE TABLE statement match them, or "
            "restore the table's columns",
        )


def _nearest_folder(uri: str) -> str:
    """', the nearest existing folder is X (holding a, b, ...)' for a local path; '' elsewhere."""
    local = uri.removeprefix("file://")
    if "://" in local:
        return ""
    folder = os.path.dirname(os.path.abspath(local))
    while not os.path.isdir(folder) and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
    entries = sorted(e for e in os.listdir(folder) if not e.startswith("."))
    shown = ", ".join(entries[:8]) + (", ..." if len(entries) > 8 else "")
    return f"; the nearest existing folder is {folder}" + (
        f", which holds: {shown}" if entries else ", empty"
    )
