"""Arrow types Spark cannot take are mapped, and the mapped batches reach Spark intact."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa

from mvengine.storage.types import conform_batch, spark_compatible_schema


def test_unsupported_arrow_types_are_mapped_and_values_kept(spark):
    source = pa.record_batch(
        {
            "sv": pa.array(["a", None], pa.string_view()),
            "ls": pa.array(["b", "c"], pa.large_string()),
            "bv": pa.array([b"x", None], pa.binary_view()),
            "u8": pa.array([255, 0], pa.uint8()),
            "u32": pa.array([2**32 - 1, 1], pa.uint32()),
            "u64": pa.array([2**64 - 1, None], pa.uint64()),
            "ns": pa.array([1_000_000_001, None], pa.timestamp("ns", tz="Europe/Paris")),
            "dict": pa.array(["p", "q"]).dictionary_encode(),
            "ll": pa.array([[1], None], pa.large_list(pa.uint16())),
            "st": pa.array([{"v": "s"}, None], pa.struct([("v", pa.string_view())])),
        }
    )
    target = spark_compatible_schema(source.schema)
    assert [str(f.type) for f in target] == [
        "string",
        "string",
        "binary",
        "int16",
        "int64",
        "decimal128(20, 0)",
        "timestamp[us, tz=UTC]",
        "string",
        "list<item: int32>",
        "struct<v: string>",
    ]
    batch = conform_batch(source, target)
    df = spark.createDataFrame(pa.Table.from_batches([batch]))
    got = [tuple(r) for r in df.collect()]
    assert got[0][:6] == ("a", "b", bytearray(b"x"), 255, 2**32 - 1, Decimal(2**64 - 1))
    assert got[0][6] == dt.datetime(1970, 1, 1, 0, 0, 1)  # session time zone is UTC; ns truncated to us
    assert got[0][7:] == ("p", [1], ({"v": "s"}["v"],))
    assert got[1] == (None, "c", None, 0, 1, None, None, "q", None, None)
