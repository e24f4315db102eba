"""Expectations checked by great-expectations (GX) on the rows each batch inserts (docs/guides/expectations.md).

Every declared expectation becomes GX expectations in one suite per table, made once per process in one
ephemeral GX context and reused across batches. A batch's inserted rows (new rows and new versions of updated
ones: the +1 rows of its Z-set) are validated by GX's pandas engine when they are on the driver as Arrow, by
its Spark engine otherwise. A predicate GX has no expectation for is checked with its UnexpectedRowsExpectation,
which runs SQL: only on the Spark engine, so a table with one is always validated there.

GX reports; it does not decide which rows a view keeps. That is the filter the plan puts over the table (plan
/view_plan.py, plan/binder.py), the same in a batch on the driver, in Spark and in a recomputation, so that a
snapshot is the same whichever computed it. Both judge a row by the same condition: GX's column expectations
skip NULLs as the filter's `COALESCE(predicate, TRUE)` keeps them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from sqlglot import exp

from mvengine.errors import MvError
from mvengine.runtime.crash_points import boundary
from mvengine.sql.expectations import Expectation
from mvengine.storage.api import write_table
from mvengine.storage.tables import TableRef, is_committed

if TYPE_CHECKING:  # pyspark is imported only when a batch runs in Spark
    from pyspark.sql import DataFrame

SAMPLE_ROWS = 5  # failing rows an error shows
# A comparison of a column with a number, as ExpectColumnValuesToBeBetween's bound and whether it is strict.
_COMPARISONS: dict[type[exp.Expr], tuple[str, bool]] = {
    exp.GT: ("min_value", True),
    exp.GTE: ("min_value", False),
    exp.LT: ("max_value", True),
    exp.LTE: ("max_value", False),
}
_FLIPPED: dict[type[exp.Expr], type[exp.Expr]] = {
    exp.GT: exp.LT,
    exp.GTE: exp.LTE,
    exp.LT: exp.GT,
    exp.LTE: exp.GTE,
}


class ExpectationFailed(MvError):
    """A FAIL UPDATE expectation failed: the batch commits nothing. `view`: the first view it stopped."""

    view: str | None = None


@dataclass
class Outcome:
    """One expectation over one batch's rows: how many it checked and failed, and what became of them."""

    table: str
    name: str
    on_violation: str
    checked: int
    failed: int
    sample: list[dict] = field(default_factory=list)  # some failing rows (row-level kinds)
    indices: list[int] | None = None  # the failing rows' positions, when validated on the driver

    @property
    def dropped(self) -> int:
        return self.failed if self.on_violation in ("DROP ROW", "QUARANTINE") else 0

    @property
    def quarantined(self) -> int:
        return self.failed if self.on_violation == "QUARANTINE" else 0

    def to_json(self) -> dict:
        return {
            "table": self.table,
            "expectation": self.name,
            "on_violation": self.on_violation,
            "checked": self.checked,
            "failed": self.failed,
            "dropped": self.dropped,
            "quarantined": self.quarantined,
        }


def gx_expectation(e: Expectation):
    """The GX expectation that checks `e`: a column expectation where GX has one, else its
    UnexpectedRowsExpectation with the predicate as SQL."""
    import great_expectations.expectations as gxe

    meta = {"mvengine": e.name}
    if e.kind == "not_null":
        return gxe.ExpectColumnValuesToNotBeNull(column=e.columns[0], meta=meta)
    if e.kind == "values_in":
        return gxe.ExpectColumnValuesToBeInSet(column=e.columns[0], value_set=list(e.values), meta=meta)
    if e.kind == "unique":
        return (
            gxe.ExpectCompoundColumnsToBeUnique(column_list=list(e.columns), meta=meta)
            if len(e.columns) > 1
            else gxe.ExpectColumnValuesToBeUnique(column=e.columns[0], meta=meta)
        )
    if e.kind == "row_count":
        return gxe.ExpectTableRowCountToBeBetween(min_value=e.low, max_value=e.high, meta=meta)
    return _column_expectation(e.row_condition, meta) or gxe.UnexpectedRowsExpectation(
        unexpected_rows_query=f"SELECT * FROM {{batch}} WHERE NOT COALESCE({e.row_condition.sql('spark')}, TRUE)",
        meta=meta,
    )


def _column_expectation(c: exp.Expr, meta: dict):
    """The GX column expectation that is the predicate `c` (NULLs passing), or None when GX has none: a bound
    or two on one column, a comparison of two columns, NOT NULL, IN, RLIKE."""
    import great_expectations.expectations as gxe

    c = c.unnest() if isinstance(c, exp.Paren) else c
    if isinstance(c, exp.And | exp.Between) or type(c) in _COMPARISONS:
        bounds = _bounds(c)
        if bounds is not None and len({column for column, _ in bounds}) == 1:
            arguments: dict[str, Any] = dict(argument for _, argument in bounds)
            if len(arguments) == len(bounds):  # not two lower (or upper) bounds
                return gxe.ExpectColumnValuesToBeBetween(column=bounds[0][0], **arguments, meta=meta)
    if (
        type(c) in (exp.GT, exp.GTE, exp.LT, exp.LTE)
        and isinstance(c.this, exp.Column)
        and isinstance(c.expression, exp.Column)
    ):
        greater, smaller = (c.this, c.expression) if type(c) in (exp.GT, exp.GTE) else (c.expression, c.this)
        return gxe.ExpectColumnPairValuesAToBeGreaterThanB(
            column_A=greater.name,
            column_B=smaller.name,
            or_equal=type(c) in (exp.GTE, exp.LTE),
            ignore_row_if="either_value_is_missing",
            meta=meta,
        )
    if (
        isinstance(c, exp.Not)
        and isinstance(c.this, exp.Is)
        and isinstance(c.this.expression, exp.Null)
        and isinstance(c.this.this, exp.Column)
    ):
        return gxe.ExpectColumnValuesToNotBeNull(column=c.this.this.name, meta=meta)
    if (
        isinstance(c, exp.In)
        and isinstance(c.this, exp.Column)
        and not c.args.get("query")
        and all(isinstance(v, exp.Literal) for v in c.expressions)
    ):
        values = [v.this if v.is_string else _number(v) for v in c.expressions]
        return gxe.ExpectColumnValuesToBeInSet(column=c.this.name, value_set=values, meta=meta)
    if isinstance(c, exp.RegexpLike) and isinstance(c.this, exp.Column) and c.expression.is_string:
        return gxe.ExpectColumnValuesToMatchRegex(column=c.this.name, regex=c.expression.this, meta=meta)
    return None


def _bounds(c: exp.Expr) -> list[tuple[str, tuple[str, object]]] | None:
    """`c` as bounds on columns, [(column, (argument, value))] (arguments of ExpectColumnValuesToBeBetween:
    min_value, max_value, strict_min, strict_max), or None when it is not only numeric bounds."""
    c = c.unnest() if isinstance(c, exp.Paren) else c
    if isinstance(c, exp.And):
        first, second = _bounds(c.left), _bounds(c.right)
        return None if first is None or second is None else first + second
    if isinstance(c, exp.Between) and isinstance(c.this, exp.Column):
        low, high = _number(c.args["low"]), _number(c.args["high"])
        if low is None or high is None:
            return None
        return [(c.this.name, ("min_value", low)), (c.this.name, ("max_value", high))]
    if type(c) not in _COMPARISONS:
        return None
    kind: type[exp.Expr] = type(c)
    left, right = c.this, c.expression
    if isinstance(right, exp.Column) and not isinstance(left, exp.Column):
        kind, left, right = _FLIPPED[kind], right, left
    number = _number(right)
    if not isinstance(left, exp.Column) or number is None:
        return None
    bound, strict = _COMPARISONS[kind]
    return [(left.name, (bound, number)), (left.name, (f"strict_{bound[:3]}", strict))]


def _number(e: exp.Expression) -> int | float | None:
    if isinstance(e, exp.Neg):
        inner = _number(e.this)
        return None if inner is None else -inner
    if isinstance(e, exp.Literal) and not e.is_string:
        return int(e.this) if e.this.lstrip("-").isdigit() else float(e.this)
    return None


class Validator:
    """One GX context for the process, and a suite per (table, expectations) kept in it across batches."""

    def __init__(self) -> None:
        self._context = None
        self._suites: dict[tuple, tuple[object, dict[str, Expectation], bool]] = {}
        self._batches: dict[str, object] = {}  # engine ("pandas", "spark") -> its batch definition

    def _gx(self):
        if self._context is None:
            os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")  # no network calls from a refresh
            import great_expectations as gx
            from great_expectations.data_context.types.base import ProgressBarsConfig

            self._context = gx.get_context(mode="ephemeral")
            self._context.variables.progress_bars = ProgressBarsConfig(globally=False)
        return self._context

    def suite(self, table: str, expectations: tuple[Expectation, ...]):
        """The table's suite (made on first use), its expectations by name, and whether it needs Spark."""
        key = (table, tuple(e.text for e in expectations))
        if key not in self._suites:
            import great_expectations as gx

            context = self._gx()
            suite = gx.ExpectationSuite(name=f"mvengine.{table}.{len(self._suites)}")
            spark_only = False
            for e in expectations:
                g = gx_expectation(e)
                spark_only |= type(g).__name__ == "UnexpectedRowsExpectation"
                suite.add_expectation(g)
            self._suites[key] = (context.suites.add(suite), {e.name: e for e in expectations}, spark_only)
        return self._suites[key]

    def _batch_definition(self, engine: str):
        if engine not in self._batches:
            context = self._gx()
            source = (
                context.data_sources.add_pandas("mvengine_pandas")
                if engine == "pandas"
                else context.data_sources.add_spark("mvengine_spark")
            )
            self._batches[engine] = source.add_dataframe_asset("rows").add_batch_definition_whole_dataframe(
                "all"
            )
        return self._batches[engine]

    def validate(
        self, table: str, expectations: tuple[Expectation, ...], rows: pa.Table | DataFrame
    ) -> list[Outcome]:
        """Each expectation over `rows`: Arrow by GX's pandas engine, a Spark DataFrame by its Spark engine (which
        a suite holding an UnexpectedRowsExpectation needs)."""
        if not expectations:
            return []
        suite, by_name, spark_only = self.suite(table, expectations)
        if isinstance(rows, pa.Table):
            if spark_only:
                raise ValueError("this table's expectations need the Spark engine")
            frame, engine = rows.to_pandas(), "pandas"
            checked = rows.num_rows
        else:
            frame, engine = rows, "spark"
            checked = rows.count()
        if checked == 0:
            return [Outcome(table, e.name, e.on_violation, 0, 0) for e in expectations]
        batch = self._batch_definition(engine).get_batch(batch_parameters={"dataframe": frame})
        result = batch.validate(
            suite,
            result_format={"result_format": "COMPLETE", "partial_unexpected_count": 0}
            if engine == "pandas"
            else {"result_format": "SUMMARY"},
        )
        outcomes = []
        for r in result.results:
            e = by_name[r.expectation_config.meta["mvengine"]]
            if e.kind == "row_count":
                outcomes.append(Outcome(table, e.name, e.on_violation, checked, int(not r.success)))
            elif isinstance(rows, pa.Table) and e.kind != "unique":  # the pandas engine
                indices = [int(i) for i in r.result.get("unexpected_index_list") or []]
                sample = rows.take(pa.array(indices[:SAMPLE_ROWS], pa.int64())).to_pylist()
                outcomes.append(
                    Outcome(table, e.name, e.on_violation, checked, len(indices), sample, indices)
                )
            else:
                outcomes.append(Outcome(table, e.name, e.on_violation, checked, _unexpected(r)))
        return outcomes


def _unexpected(r) -> int:
    """The failing rows a GX result counts (UnexpectedRowsExpectation reports them as its observed value)."""
    result = r.result or {}
    if "unexpected_count" in result:
        return int(result["unexpected_count"] or 0)
    observed = result.get("observed_value")
    return int(observed) if isinstance(observed, int) else 0 if r.success else 1


def inserted(zset):
    """The rows a Z-set (Arrow or Spark) inserts, once per unit of weight, without its _w and _mtime."""
    from mvengine.incremental.zset import MTIME, WEIGHT

    if isinstance(zset, pa.Table):
        weights = zset.column(WEIGHT).to_numpy()
        positions = np.repeat(np.arange(zset.num_rows), np.maximum(weights, 0))
        return zset.drop_columns([WEIGHT, MTIME]).take(pa.array(positions, pa.int64()))
    from pyspark.sql import functions as F

    columns = [c for c in zset.columns if c not in (WEIGHT, MTIME)]
    return (
        zset.where(F.col(WEIGHT) > 0)
        .select(*columns, F.explode(F.sequence(F.lit(1), F.col(WEIGHT).cast("int"))).alias("_copy"))
        .drop("_copy")
    )


def failure_message(outcome: Outcome, what: str) -> str:
    sample = "; ".join(str(r) for r in outcome.sample[:SAMPLE_ROWS])
    return (
        f"expectation {outcome.name} (ON VIOLATION FAIL UPDATE) of {what} failed: {outcome.failed} of "
        f"{outcome.checked} rows" + (f", e.g. {sample}" if sample else "") + ": nothing was committed"
    )


class Checks:
    """What a refresh does with a table's expectations over a batch's rows: validates them (GX), writes the rows
    QUARANTINE refuses to the table's quarantine table (once: under the application transaction of the
    version or batch they came in), and stops the batch when a FAIL UPDATE one fails."""

    def __init__(self, spark) -> None:
        self.spark = spark
        self.validator = Validator()

    @staticmethod
    def app(quarantine: TableRef) -> str:
        """The application id of a quarantine table's writes; its transaction version is the source version
        (or view batch) of the last rows written."""
        return f"mvengine:quarantine:{quarantine.name}"

    def check(
        self,
        table: str,
        expectations: tuple[Expectation, ...],
        rows,
        *,
        quarantine: TableRef | None,
        version: int,
        batch_id: int,
        what: str,
        whole=None,
        recomputed: bool = False,
    ) -> list[Outcome]:
        """The outcomes of `expectations` over `rows` (the inserted rows: Arrow or Spark), and of the
        table-level ones over `whole` (the table after the batch, a Spark DataFrame; None: not checked); the
        refused rows written to `quarantine` (None: not written; `recomputed`: `rows` are a recomputation's,
        which holds rows quarantined before again: only the others are written)."""
        row_level = tuple(e for e in expectations if e.row_level)
        if isinstance(rows, pa.Table) and self.validator.suite(table, row_level)[2]:
            rows = self.spark.createDataFrame(rows)  # a predicate only GX's Spark engine checks
        outcomes = self.validator.validate(table, row_level, rows) if row_level else []
        table_level = tuple(e for e in expectations if not e.row_level)
        if table_level and whole is not None:
            outcomes += self.validator.validate(table, table_level, whole)
        for o in outcomes:
            if o.on_violation == "FAIL UPDATE" and o.failed:
                raise ExpectationFailed(
                    failure_message(o, what),
                    hint="fix the rows (or the expectation) and refresh again; mv history "
                    "shows the versions that brought them",
                )
        if quarantine is not None:
            self.quarantine(
                table, expectations, rows, outcomes, quarantine, version, batch_id, recomputed=recomputed
            )
        return outcomes

    def quarantine(
        self,
        table: str,
        expectations: tuple[Expectation, ...],
        rows,
        outcomes: list[Outcome],
        ref: TableRef,
        version: int,
        batch_id: int,
        *,
        recomputed: bool = False,
    ) -> None:
        """The rows QUARANTINE expectations refused, each with the expectation's name, the version (or batch)
        it came in and the batch, written once (`recomputed`: see `check`)."""
        by_name = {e.name: e for e in expectations}
        refused = [
            (by_name[o.name], o)
            for o in outcomes
            if o.table == table and o.on_violation == "QUARANTINE" and o.failed
        ]
        app = self.app(ref)
        if not refused or is_committed(ref, app, version):
            return  # written by an earlier run of this batch (or a view that read these versions before)
        if isinstance(rows, pa.Table) and not recomputed and all(o.indices is not None for _, o in refused):
            parts = [
                rows.take(pa.array(o.indices or [], pa.int64())).append_column(
                    "_expectation", pa.array([e.name] * len(o.indices or []), pa.string())
                )
                for e, o in refused
            ]
            written = pa.concat_tables(parts)
            written = written.append_column(
                "_version", pa.array([version] * written.num_rows, pa.int64())
            ).append_column("_batch", pa.array([batch_id] * written.num_rows, pa.int64()))
            self._write(written, ref, (app, version), table)
            return
        from pyspark.sql import functions as F

        if isinstance(rows, pa.Table):
            rows = self.spark.createDataFrame(rows)
        parts = [
            rows.where(
                f"NOT COALESCE({e.row_condition.sql('spark')}, TRUE)"
                if e.kind != "not_null"
                else f"NOT ({e.row_condition.sql('spark')})"
            ).withColumn("_expectation", F.lit(e.name))
            for e, _ in refused
        ]
        frame = parts[0]
        for part in parts[1:]:
            frame = frame.unionByName(part)
        if recomputed and ref.exists():  # the rows not quarantined before (by value and expectation)
            from mvengine.incremental.zset import null_safe_equal
            from mvengine.storage.api import read_table

            before = read_table(self.spark, ref).select(*frame.columns)
            frame = frame.join(before, null_safe_equal(frame, before, frame.columns), "left_anti")
        frame = frame.withColumn("_version", F.lit(version).cast("long")).withColumn(
            "_batch", F.lit(batch_id).cast("long")
        )
        self._write(frame, ref, (app, version), table)

    @staticmethod
    def _write(rows, ref: TableRef, txn: tuple[str, int], table: str) -> None:
        """One commit of quarantined rows, between two crash points (runtime/crash_points.py)."""
        boundary(table, "quarantine", "before")
        write_table(rows, ref, txn=txn)
        boundary(table, "quarantine", "after")
