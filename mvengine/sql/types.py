"""Column types written in SQL (sqlglot DataType) as Arrow types, without starting Spark."""

from __future__ import annotations

import pyarrow as pa
from sqlglot import exp

_SIMPLE = {
    exp.DataType.Type.TEXT: pa.string(),
    exp.DataType.Type.VARCHAR: pa.string(),
    exp.DataType.Type.CHAR: pa.string(),
    exp.DataType.Type.BOOLEAN: pa.bool_(),
    exp.DataType.Type.TINYINT: pa.int8(),
    exp.DataType.Type.SMALLINT: pa.int16(),
    exp.DataType.Type.INT: pa.int32(),
    exp.DataType.Type.BIGINT: pa.int64(),
    exp.DataType.Type.FLOAT: pa.float32(),
    exp.DataType.Type.DOUBLE: pa.float64(),
    exp.DataType.Type.DATE: pa.date32(),
    exp.DataType.Type.BINARY: pa.binary(),
    # Spark's TIMESTAMP is an instant (sqlglot calls it TIMESTAMPTZ); TIMESTAMP_NTZ is a wall-clock time.
    exp.DataType.Type.TIMESTAMPTZ: pa.timestamp("us", tz="UTC"),
    exp.DataType.Type.TIMESTAMP: pa.timestamp("us"),
    exp.DataType.Type.TIMESTAMPNTZ: pa.timestamp("us"),
}


def arrow_type(dtype: exp.DataType) -> pa.DataType | None:
    """The Arrow type of a SQL column type, or None when mvengine does not support it."""
    if dtype.this in _SIMPLE:
        return _SIMPLE[dtype.this]
    params = dtype.expressions
    if dtype.this == exp.DataType.Type.DECIMAL:
        precision, scale = (int(p.name) for p in params) if len(params) == 2 else (10, 0)
        return pa.decimal128(precision, scale) if 0 < precision <= 38 and 0 <= scale <= precision else None
    if dtype.this == exp.DataType.Type.ARRAY and len(params) == 1:
        item = arrow_type(params[0])
        return pa.list_(item) if item is not None else None
    if dtype.this == exp.DataType.Type.MAP and len(params) == 2:
        key, value = arrow_type(params[0]), arrow_type(params[1])
        return pa.map_(key, value) if key is not None and value is not None else None
    if dtype.this == exp.DataType.Type.STRUCT:
        fields = []
        for p in params:
            t = arrow_type(p.args["kind"]) if isinstance(p, exp.ColumnDef) else None
            if t is None:
                return None
            fields.append(pa.field(p.name, t))
        return pa.struct(fields)
    return None


# Delta's names of primitive types (its log's schema, as Spark's StructType JSON) in Spark SQL's words.
_DELTA_PRIMITIVES = {
    "string": "STRING",
    "long": "BIGINT",
    "integer": "INT",
    "short": "SMALLINT",
    "byte": "TINYINT",
    "float": "FLOAT",
    "double": "DOUBLE",
    "boolean": "BOOLEAN",
    "binary": "BINARY",
    "date": "DATE",
    "timestamp": "TIMESTAMP",
    "timestamp_ntz": "TIMESTAMP_NTZ",
}


def delta_type_sql(t: str | dict) -> str | None:
    """A column type of a Delta table's log (Spark's StructType JSON) in Spark SQL's words, as a CREATE TABLE
    would declare it; None for a type mvengine does not read (void, variant, intervals)."""
    if isinstance(t, str):
        if t.startswith("decimal("):
            return t.upper()
        return _DELTA_PRIMITIVES.get(t)
    kind = t.get("type")
    if kind == "array":
        item = delta_type_sql(t["elementType"])
        return None if item is None else f"ARRAY<{item}>"
    if kind == "map":
        key, value = delta_type_sql(t["keyType"]), delta_type_sql(t["valueType"])
        return None if key is None or value is None else f"MAP<{key}, {value}>"
    if kind == "struct":
        fields = [(f["name"], delta_type_sql(f["type"])) for f in t["fields"]]
        if any(sql is None for _, sql in fields):
            return None
        inner = ", ".join(f"`{name.replace('`', '``')}`: {sql}" for name, sql in fields)
        return f"STRUCT<{inner}>"
    return None
