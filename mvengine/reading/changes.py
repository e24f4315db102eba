"""The STREAM renderings of a view's changelog (seed 002; the dynamic-tables paper's retract and upsert streams).

Retract form (the changelog as written): every `+I`, `-U`, `+U`, `-D`, with `_undo` marking the rows that take
back an earlier one. Upsert form (the redo stream): one row per key change holding the key's new values, a
delete as the key with its other columns NULL and `_tombstone` true; it exists only for views with a key.

Both are in emission order: by snapshot version, then key (a bag: its columns), then revision, with a key's
retraction before its new row. Rows of one version have no order of their own: they were committed together.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import MapType

from mvengine.errors import MvError
from mvengine.names import quote_identifier
from mvengine.plan.view_plan import ViewPlan

SHOWN = ["_op", "_undo", "_mtime", "_version", "_batch_id", "_emit_index"]
UPSERT_SHOWN = ["_op", "_tombstone", "_mtime", "_version", "_batch_id", "_emit_index"]


def retract(changelog: DataFrame, plan: ViewPlan) -> DataFrame:
    columns = [c.name for c in plan.columns]
    return _ordered(changelog.select(*[_col(c) for c in columns + SHOWN + _timing(plan)]), plan)


def _timing(plan: ViewPlan) -> list[str]:
    """`_emit_timing` for a windowed view (early, on_time, late); other views' rows have none."""
    return ["_emit_timing"] if plan.window() else []


def upsert(changelog: DataFrame, plan: ViewPlan) -> DataFrame:
    if plan.key is None:
        raise MvError(
            f"view {plan.name} has no unique key, so its changes have no upsert form: a row of a bag "
            "cannot be updated in place, only retracted and inserted",
            hint=f"show them in retract form: mv changes {plan.name} (without --upsert)",
        )
    deleted = F.col("_op") == "-D"
    values = [
        _col(c.name)
        if c.name in plan.key
        else F.when(deleted, F.lit(None)).otherwise(_col(c.name)).alias(c.name)
        for c in plan.columns
    ]
    rows = changelog.where(F.col("_op") != "-U").select(
        *values, "_op", deleted.alias("_tombstone"), *[c for c in UPSERT_SHOWN[2:]], *_timing(plan)
    )
    return _ordered(rows, plan)


def _ordered(rows: DataFrame, plan: ViewPlan) -> DataFrame:
    if plan.key is not None:
        within = [_col(k) for k in plan.key] + [F.col("_emit_index")]
    else:
        within = [_col(c.name) for c in plan.columns if not isinstance(rows.schema[c.name].dataType, MapType)]
    undo = F.col("_undo").desc() if "_undo" in rows.columns else F.col("_tombstone").desc()
    return rows.orderBy(F.col("_version"), *within, undo)


def _col(name: str) -> Column:
    return F.col(quote_identifier(name))
