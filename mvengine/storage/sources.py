"""Source tables: created on first use with the change data feed on, checked on every later use."""

from __future__ import annotations

import os

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
    CREATE TABLE) locates the errors."""
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
    have = {f.name: f.type for f in spark_compatible_schema(pa.schema(dt.schema().to_arrow()))}
    declared = {f.name: f.type for f in spark_compatible_schema(schema)}
    if list(have.items()) != list(declared.items()):
        differences = [f"column {n} {t} is not declared" for n, t in have.items() if n not in declared]
        differences += [f"declared column {n} is missing" for n in declared if n not in have]
        differences += [
            f"column {n} is {have[n]}, declared {t}"
            for n, t in declared.items()
            if n in have and have[n] != t
        ]
        what = "; ".join(differences) or "its columns are in another order than declared"
        raise StorageError(
            f"{declared_at + ': ' if declared_at else ''}{ref.label} (version {dt.version()}) no longer has the "
            f"declared columns: {what}; nothing was written",
            hint="another writer changed the table's columns: make the CREATE TABLE statement match them (and, "
            "for a retyped or dropped column, recompute the views over it with mv refresh --full), or "
            "restore the table's columns",
        )
    return False


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
