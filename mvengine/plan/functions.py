"""What the planner knows of Spark's functions by name: which are non-deterministic, and how Spark spells a call."""

from __future__ import annotations

from sqlglot import exp

# Functions whose result changes from one run to the next: a view using them can only be recomputed.
NON_DETERMINISTIC = frozenset({
    "rand", "randn", "random", "uuid", "shuffle", "current_timestamp", "current_date", "now", "localtimestamp",
    "unix_timestamp", "monotonically_increasing_id", "spark_partition_id", "input_file_name",
    "input_file_block_start", "input_file_block_length", "randstr", "uniform", "current_user", "user",
    "session_user", "current_time",
})


def function_name(f: exp.Expression) -> str:
    """The function's name as Spark SQL spells it (sqlglot's own class names differ, e.g. for
    percentile_approx)."""
    if isinstance(f, exp.Anonymous):
        return str(f.this).lower()
    return f.sql("spark").split("(", 1)[0].strip().lower()
