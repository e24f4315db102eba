"""Arrow types as Spark accepts them.

delta-rs hands out Arrow types that Spark's Arrow reader cannot take (string and binary views, unsigned
integers from external writers, nanosecond timestamps, large lists, dictionaries). Every batch that goes to
Spark is first cast to the Spark-compatible twin of its schema, computed here.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

UTC = "UTC"


def spark_compatible_type(t: pa.DataType) -> pa.DataType:
    """The Arrow type Spark reads for values of Arrow type `t` (identity when Spark takes `t` as is)."""
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if (
        pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_binary_view(t)
        or pa.types.is_fixed_size_binary(t)
    ):
        return pa.binary()
    if pa.types.is_unsigned_integer(t):
        # Widen to the next signed type; uint64 does not fit int64, so it becomes DECIMAL(20, 0).
        return {8: pa.int16(), 16: pa.int32(), 32: pa.int64()}.get(t.bit_width, pa.decimal128(20, 0))
    if pa.types.is_float16(t):
        return pa.float32()
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", tz=UTC if t.tz else None)
    if pa.types.is_date64(t):
        return pa.date32()
    if pa.types.is_duration(t):
        return pa.duration("us")
    if pa.types.is_time(t):
        return pa.time64("us")
    if pa.types.is_decimal(t):
        return pa.decimal128(t.precision, t.scale) if t.precision <= 38 else pa.string()
    if pa.types.is_dictionary(t):
        return spark_compatible_type(t.value_type)
    if (
        pa.types.is_list(t)
        or pa.types.is_large_list(t)
        or pa.types.is_fixed_size_list(t)
        or pa.types.is_list_view(t)
        or pa.types.is_large_list_view(t)
    ):
        return pa.list_(spark_compatible_field(t.value_field))
    if pa.types.is_map(t):
        return pa.map_(spark_compatible_type(t.key_type), spark_compatible_field(t.item_field))
    if pa.types.is_struct(t):
        return pa.struct([spark_compatible_field(t.field(i)) for i in range(t.num_fields)])
    return t


def spark_compatible_field(f: pa.Field) -> pa.Field:
    return pa.field(f.name, spark_compatible_type(f.type), f.nullable)


def spark_compatible_schema(schema: pa.Schema) -> pa.Schema:
    return pa.schema([spark_compatible_field(f) for f in schema])


def conform_batch(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """Select `target`'s columns from `batch` by name, in target order, cast to target's types."""
    columns = []
    for field in target:
        column = batch.column(field.name)
        if pa.types.is_dictionary(column.type):
            column = column.dictionary_decode()
        if column.type != field.type:
            # Nanosecond timestamps are truncated to Spark's microseconds; every other cast must be exact.
            column = column.cast(field.type, safe=not pa.types.is_timestamp(field.type))
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, schema=target)


def table_of_batches(batches: list[pa.RecordBatch], schema: pa.Schema) -> pa.Table:
    """The batches as one table, with at least one chunk per column: PySpark's createDataFrame cannot take a
    nested column of no chunks ("cannot construct ChunkedArray from empty vector", issue 35)."""
    return (
        pa.Table.from_batches(batches, schema) if any(b.num_rows for b in batches) else schema.empty_table()
    )


def spark_to_arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema of batches that Spark accepts for a Spark schema (timestamps as UTC microseconds)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone=UTC)


def delta_to_spark_schema(delta_schema_json: str) -> StructType:
    """A Delta schema (the JSON of the transaction log, which is Spark's own schema JSON) as a StructType."""
    from pyspark.sql.types import StructType

    return StructType.fromJson(json.loads(delta_schema_json))
