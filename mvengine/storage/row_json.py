"""Rows as JSON text, the `row` column of a view's late-rows table (incremental/lateness.py): one function, which
the driver calls and Spark runs as an Arrow UDF, so the text is the same whichever engine wrote it. Compact, every
column (NULL as null), numbers as numbers (a DECIMAL with its scale's digits; NaN and the infinities as the
strings "NaN", "Infinity", "-Infinity"), a TIMESTAMP in UTC as `2026-11-23T12:01:40Z` (TIMESTAMP_NTZ without the
Z), BINARY in base64, arrays as arrays, maps and structs as objects."""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
from decimal import Decimal
from typing import Any

import pyarrow as pa


def rows_json(rows: pa.Array) -> pa.Array:  # (Spark's Arrow UDFs take these type hints only)
    """Each row of a struct array as a JSON object (as the module's docstring says)."""
    return pa.array([_json(row) for row in rows.to_pylist(maps_as_pydicts="lossy")], pa.string())


_NON_FINITE = {math.inf: '"Infinity"', -math.inf: '"-Infinity"'}


def _json(v: Any) -> str:
    if v is None or isinstance(v, (bool, int, str)):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, float):
        return json.dumps(v) if math.isfinite(v) else _NON_FINITE.get(v, '"NaN"')
    if isinstance(v, Decimal):
        return format(v, "f")
    if isinstance(v, dt.datetime):
        if v.tzinfo is None:
            return f'"{v.isoformat()}"'
        return f'"{v.astimezone(dt.UTC).replace(tzinfo=None).isoformat()}Z"'
    if isinstance(v, dt.date):
        return f'"{v.isoformat()}"'
    if isinstance(v, bytes):
        return json.dumps(base64.b64encode(v).decode())
    if isinstance(v, dict):
        return (
            "{" + ",".join(f"{json.dumps(str(k), ensure_ascii=False)}:{_json(x)}" for k, x in v.items()) + "}"
        )
    if isinstance(v, list):
        return "[" + ",".join(_json(x) for x in v) + "]"
    return json.dumps(str(v), ensure_ascii=False)
