"""Source tables: created on first use with the change data feed on, checked on every later use."""

from __future__ import annotations

import pyarrow as pa

from mvengine.errors import StorageError
from mvengine.storage.tables import TableRef, create_table, require_cdf
from mvengine.storage.types import spark_compatible_schema


def ensure_source_table(ref: TableRef, schema: pa.Schema) -> bool:
    """Create the table when missing (returns True); otherwise check its CDF and columns (returns False)."""
    if not ref.exists():
        create_table(ref, schema)
        return True
    dt = ref.open()
    require_cdf(ref, dt)
    have = spark_compatible_schema(pa.schema(dt.schema().to_arrow()))
    declared = spark_compatible_schema(schema)
    if [(f.name, f.type) for f in have] != [(f.name, f.type) for f in declared]:
        raise StorageError(
            f"{ref.label} does not have the declared columns: table has "
            f"{', '.join(f'{f.name} {f.type}' for f in have)}; declared {', '.join(f'{f.name} {f.type}' for f in declared)}",
            hint="make the CREATE TABLE statement match the table, or point 'path' at another table")
    return False
