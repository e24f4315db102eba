"""What the planner knows of Spark's functions by name: which are non-deterministic, and how Spark spells a call."""

from __future__ import annotations

from sqlglot import exp

# Functions whose result changes from one run to the next: a view using them can only be recomputed.
NON_DETERMINISTIC = frozenset(
    {
        "rand",
        "randn",
        "random",
        "uuid",
        "shuffle",
        "current_timestamp",
        "current_date",
        "now",
        "localtimestamp",
        "unix_timestamp",
        "monotonically_increasing_id",
        "spark_partition_id",
        "input_file_name",
        "input_file_block_start",
        "input_file_block_length",
        "randstr",
        "uniform",
        "current_user",
        "user",
        "session_user",
        "current_time",
    }
)


def function_name(f: exp.Expr) -> str:
    """The function's name as Spark SQL spells it (sqlglot's own class names differ, e.g. for
    percentile_approx)."""
    if isinstance(f, exp.Anonymous):
        return str(f.this).lower()
    return f.sql("spark").split("(", 1)[0].strip().lower()


# Spark aggregates sqlglot parses as plain calls: synonyms become sqlglot's class for the same aggregate, the rest
# anonymous aggregates (so that they are grouped as Spark groups them, and planned full with the reason).
_AGGREGATE_SYNONYMS: dict[str, type[exp.Expression]] = {
    "every": exp.LogicalAnd,
    "some": exp.LogicalOr,
    "any": exp.LogicalOr,
    "std": exp.Stddev,
    "mean": exp.Avg,
}
_OTHER_AGGREGATES = frozenset(
    {"try_sum", "try_avg", "histogram_numeric", "count_min_sketch", "hll_sketch_agg", "hll_union_agg"}
)


def spark_aggregates(e: exp.Expr) -> exp.Expr:
    """`e` with Spark's aggregate calls that sqlglot does not know as aggregates made into aggregates."""

    def fix(node: exp.Expression) -> exp.Expression:
        if (
            isinstance(node, exp.Any)
            and not isinstance(node.this, (exp.Query, exp.Subquery))
            and not isinstance(node.parent, (exp.Predicate, exp.Binary))
        ):
            return exp.LogicalOr(this=node.this)  # any(b); `x = ANY (subquery)` stays
        if not isinstance(node, exp.Anonymous):
            return node
        name = str(node.this).lower()
        if name in _AGGREGATE_SYNONYMS and len(node.expressions) == 1:
            return _AGGREGATE_SYNONYMS[name](this=node.expressions[0])
        if name in _OTHER_AGGREGATES:
            return exp.AnonymousAggFunc(this=node.this, expressions=node.expressions)
        return node

    return e.transform(fix, copy=False)


NULLS_OPTIONS = (exp.IgnoreNulls, exp.RespectNulls)  # `agg(x) IGNORE NULLS`, Spark's `first(x, true)`


def aggregate_function(call: exp.Expression) -> exp.Expression:
    """The function of an aggregate call written `f(x)`, `f(x) FILTER (WHERE ...)` or `f(x) IGNORE NULLS`."""
    if isinstance(call, exp.Filter):
        call = call.this
    return call.this if isinstance(call, NULLS_OPTIONS) else call


def in_window(e: exp.Expr) -> bool:
    """Whether `e` is the function of a window (`f(x) OVER (...)`, `f(x) IGNORE NULLS OVER (...)`)."""
    parent = e.parent
    if isinstance(parent, NULLS_OPTIONS):
        parent = parent.parent
    return isinstance(parent, exp.Window)
