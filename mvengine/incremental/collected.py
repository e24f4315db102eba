"""What a Spark batch may bring to the driver: a DataFrame's rows as Arrow when they are few, and which plans
cost no more to read again (or in part) than the rows they give."""

from __future__ import annotations

import pyarrow as pa
from pyspark.errors import PySparkTypeError
from pyspark.sql import DataFrame

from mvengine.storage.types import conform_batch, spark_to_arrow_schema, table_of_batches

# The logical operators of a plan that reads files and projects or filters their rows, as Spark prints them.
_SCAN_OPERATORS = frozenset({"Project", "Filter", "Relation", "LocalRelation"})
# ...and of one that reads rows already computed (checkpoints, local rows) row by row.
_KEPT_ROW_OPERATORS = frozenset({"Project", "Filter", "Generate", "Union", "LogicalRDD", "LocalRelation"})


def reads_files_only(df: DataFrame) -> bool:
    """Whether `df`'s optimized plan reads files (or local rows) and only projects or filters them, by
    deterministic expressions."""
    return _made_of(df, _SCAN_OPERATORS)


def reads_kept_rows_only(df: DataFrame) -> bool:
    """Whether `df` only projects, filters, explodes or unites rows already computed (checkpoints, local
    rows): reading some of its rows costs no more than reading as many of those, never a join's or an
    aggregate's work again."""
    return _made_of(df, _KEPT_ROW_OPERATORS)


def _made_of(df: DataFrame, operators: frozenset[str]) -> bool:
    plan = df._jdf.queryExecution().optimizedPlan()
    if not plan.deterministic():
        return False
    for line in plan.toString().splitlines():
        operator = line.lstrip(" :+-").split(" ", 1)[0].split("[", 1)[0]
        if operator and operator not in operators:
            return False
    return True


def collect_small(df: DataFrame, limit: int) -> pa.Table | None:
    """The DataFrame's rows as Arrow (with the types Spark's writers take), in one Spark job; None when it holds
    more than `limit` rows, or a type Arrow cannot carry."""
    schema = _arrow_schema(df)
    if schema is None:
        return None
    table = df.limit(limit + 1).toArrow()
    if table.num_rows > limit:
        return None
    return _conformed(table, schema)


def collect_kept(df: DataFrame, most: int) -> pa.Table | None:
    """`collect_small` for rows already computed (`reads_kept_rows_only`), counted first: a collect with a
    limit moves up to that many rows of every partition through one task, most of a large relation. None for
    rows not kept."""
    schema = _arrow_schema(df) if reads_kept_rows_only(df) else None
    if schema is None or df.count() > most:
        return None
    return _conformed(df.toArrow(), schema)


def _arrow_schema(df: DataFrame) -> pa.Schema | None:
    """The Arrow schema Spark's writers take for the DataFrame's columns; None for a type Arrow cannot carry."""
    try:
        return spark_to_arrow_schema(df.schema)
    except PySparkTypeError:
        return None


def _conformed(table: pa.Table, schema: pa.Schema) -> pa.Table:
    return table_of_batches([conform_batch(b, schema) for b in table.to_batches()], schema)
