"""The delta rules alone, Feldera-style: a weighted delta in, the weighted delta out, checked against the view's SQL
run by Spark before and after the batch (the output delta must be `Q(after) - Q(before)`, as a Z-set).

No refresh and no Delta commit: the inputs are made from Python rows and the rules' state lives in memory
(MemoryState below, with the interface of StateStore that the rules call). Each operator's two forms take
turns on one state, batch after batch: the Spark rules (incremental/<operator>.py `delta`) and the driver's
(`driver_delta`, Arrow), so each is checked against the SQL and against the state the other left. A Spark job costs
~150 ms here whatever its size, so examples are run side by side rather than one after another: every source has a
column `_ex` (the example a row belongs to) and every view carries it through (grouped by it, joined on it), so
one batch of the rule, and one query of the oracle, covers a hundred independent examples. A failure names the
operator (each view is one operator or two) and the example's rows.

Two shapes cannot carry `_ex` without changing what they test (an aggregate without GROUP BY, an uncorrelated
EXISTS): they run one example per batch, and fewer examples.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame

from mvengine.config import load_config
from mvengine.incremental.batch import Batch
from mvengine.incremental.collected import collect_small
from mvengine.incremental.compiler import view_delta, view_delta_on_driver
from mvengine.incremental.driver import DriverBatch, consolidated, match
from mvengine.incremental.driver_expressions import NotOnDriver
from mvengine.incremental.driver_support import driver_finishes
from mvengine.incremental.hand_off import HandOff
from mvengine.incremental.zset import MTIME, WEIGHT, consolidate, null_safe_equal, quote
from mvengine.policy import DEFAULT_POLICY, ExecutionPolicy
from mvengine.project.catalog import Catalog, load_catalog
from tests.conftest import examples, oracle

SOURCES = """
CREATE TABLE a (_ex INT, k INT, g STRING, v INT);
CREATE TABLE b (_ex INT, g STRING, v INT);
CREATE TABLE c (_ex INT, g STRING, v INT) WITH ('append_only' = 'true');
"""
# One view per operator, named by what it exercises; each selects `_ex` first.
SIDE_BY_SIDE = {
    "filter_project": "SELECT _ex, k, upper(g) AS g, v * 2 AS v2 FROM a WHERE v > 0 OR v IS NULL",
    "strings": "SELECT _ex, k, regexp_extract(g, '(y)?(x*)', 1) AS r, split(g, 'x')[0] AS s0, "
    "split_part(g, 'y', -1) AS sp FROM a WHERE g RLIKE '^x' OR v > 1",
    "union_all": "SELECT _ex, g, v FROM a WHERE k > 1 UNION ALL SELECT _ex, g, v FROM b",
    "distinct_rows": "SELECT DISTINCT _ex, g, v FROM a",
    "aggregate": "SELECT _ex, g, COUNT(*) AS n, COUNT(v) AS nv, SUM(v) AS s, AVG(v) AS av, MIN(v) AS lo, "
    "MAX(v) AS hi, COUNT(DISTINCT v) AS dv, SUM(DISTINCT v) AS sdv FROM a GROUP BY _ex, g",
    # (multisets read by COUNT(DISTINCT) alone, one filtered: their counts change by the batch's values)
    "count_distinct": "SELECT _ex, g, COUNT(DISTINCT v) AS dv, COUNT(DISTINCT k) FILTER (WHERE v > 0) AS dk "
    "FROM a GROUP BY _ex, g",
    # (one multiset of a grouped column: the partials by (group, value) roll up by group)
    "multiset_of_group": "SELECT _ex, g, MAX(g) AS hg, COUNT(DISTINCT g) AS dg, SUM(v) AS s FROM a GROUP BY _ex, g",
    "aggregate_having": "SELECT _ex, g, COUNT(g) AS n FROM a GROUP BY _ex, g HAVING MAX(v) > 1 AND MIN(k) < 3",
    "aggregate_append_only": "SELECT _ex, g, MIN(v) AS lo, MAX(v) AS hi, COUNT(*) AS n FROM c GROUP BY _ex, g",
    "inner_join": "SELECT a._ex, a.k, a.v, b.v AS bv FROM a JOIN b ON a._ex = b._ex AND a.g = b.g AND a.v <= b.v",
    "left_join": "SELECT a._ex, a.k, b.v AS bv FROM a LEFT JOIN b ON a._ex = b._ex AND a.g = b.g AND b.v > 0",
    "full_join": "SELECT coalesce(a._ex, b._ex) AS _ex, a.k, b.g AS bg, b.v FROM a FULL JOIN b "
    "ON a._ex = b._ex AND a.g = b.g",
    # (the semi and anti joins over a source's rows: an EXISTS over one table tests a view of its distinct keys,
    # project/exists_keys.py, so these read the other side through a subquery in FROM, which stays)
    "semi_join": "SELECT _ex, k, g FROM a WHERE EXISTS (SELECT 1 FROM (SELECT * FROM b) AS b "
    "WHERE b._ex = a._ex AND b.g = a.g AND b.v > 0)",
    "anti_join": "SELECT _ex, g, v FROM b WHERE NOT EXISTS (SELECT 1 FROM (SELECT * FROM a) AS a "
    "WHERE a._ex = b._ex AND a.g = b.g)",
}
ONE_BY_ONE = {
    "aggregate_global": "SELECT COUNT(g) AS n, SUM(v) AS s, MIN(v) AS lo FROM a HAVING MAX(v) > 1 AND MIN(k) < 3",
    "count_distinct_global": "SELECT COUNT(DISTINCT g) AS dg, COUNT(*) AS n FROM a",
    "exists_uncorrelated": "SELECT k, v FROM a WHERE EXISTS (SELECT 1 FROM b WHERE v > 2)",
}
MTIME_VALUE = datetime(2026, 1, 1, tzinfo=UTC)
BATCHES = 4  # per example: the first from nothing (a bootstrap), then three with state
SIDE = 100  # examples side by side in one run of the rule


@dataclass
class MemoryState:
    """The state of a view's delta rules in memory, as Arrow tables: the methods of incremental.state.StateStore
    that the rules call, in both forms (DataFrames for the Spark rules, Arrow for the driver's), with commit()
    applying the staged rows as the state tables' MERGE does. One state serves both forms, batch after batch,
    as one view's state does when its batches alternate between Spark and the driver."""

    spark: object
    on_driver: bool = False  # as StateStore's: a small batch, whose rules keep their results on the driver
    policy: ExecutionPolicy = DEFAULT_POLICY  # as StateStore's: how many rows the rules collect to the driver
    tables: dict[str, pa.Table] = field(default_factory=dict)
    _pending: list[tuple[str, object, tuple[str, ...], str | None]] = field(default_factory=list)

    def holds(self, name: str) -> bool:
        return name in self.tables

    # -- the Spark rules' reads
    def read(self, name: str, template: DataFrame) -> DataFrame:
        if name not in self.tables:
            return template.limit(0)
        return self.spark.createDataFrame(self.tables[name], schema=template.schema)

    def read_candidates(self, name: str, template: DataFrame, keys: DataFrame, key_columns) -> DataFrame:
        return self.read(name, template)

    def read_for(self, name: str, template: DataFrame, keys: DataFrame, key_columns) -> DataFrame:
        state = self.read(name, template)
        if not key_columns:
            return state
        s, k = state.alias("s"), keys.select(*[quote(c) for c in key_columns]).distinct().alias("k")
        return s.join(k, null_safe_equal(s, k, key_columns), "left_semi")

    # -- the driver rules' reads
    def schema(self, name: str) -> pa.Schema | None:
        return self.tables[name].schema if name in self.tables else None

    def read_all(self, name: str) -> pa.Table | None:
        return self.tables.get(name)

    def lookup(self, name: str, rows: pa.Table, keys) -> pa.Table | None:
        if name not in self.tables:
            return None
        found = self.tables[name]
        matched, _ = match(
            [found.column(k) for k in keys], [rows.column(k) for k in keys], "left semi", null_safe=True
        )
        return found.take(matched)

    def stage(self, name: str, rows, keys, delete_column: str | None = None) -> None:
        self._pending.append((name, rows, tuple(keys), delete_column))

    def commit(self) -> None:
        for name, rows, keys, delete_column in self._pending:
            rows = rows if isinstance(rows, pa.Table) else collect_small(rows, 10**9)
            kept = (
                rows.filter(pc.invert(rows.column(delete_column))).drop_columns([delete_column])
                if delete_column
                else rows
            )
            current = self.tables.get(name)
            if current is not None:
                kept = kept.select(current.column_names).cast(current.schema)
                if keys:
                    gone, _ = match(
                        [current.column(k) for k in keys],
                        [rows.column(k) for k in keys],
                        "left anti",
                        null_safe=True,
                    )
                    kept = pa.concat_tables([current.take(gone), kept])
            self.tables[name] = kept
        self._pending.clear()


@pytest.fixture(scope="module")
def catalog(tmp_path_factory) -> Catalog:
    root: Path = tmp_path_factory.mktemp("rules")
    (root / "views").mkdir()
    (root / "views" / "sources.sql").write_text(SOURCES)
    views = {**SIDE_BY_SIDE, **ONE_BY_ONE}
    (root / "views" / "views.sql").write_text(
        "".join(f"CREATE MATERIALIZED VIEW {name} AS {sql};\n" for name, sql in views.items())
    )
    return load_catalog(load_config(root))


# -- examples: per source, the rows it loses (by position) and the rows it gains, batch after batch ----------

Contents = dict[str, list[tuple]]  # source name → rows, `_ex` first
# Few distinct values, so that groups collide, joins match and rows come back; NULLs everywhere but in k.
VALUES = {"k": [0, 1, 2, 3, 4], "g": ["x", "y", None], "v": [None, -2, -1, 0, 1, 2, 3, 4]}


def random_batch(rng: random.Random, catalog: Catalog) -> dict:
    """One batch of one example: per source, positions of rows to delete (none for an append-only source; taken
    modulo the rows there are) and rows to insert (without `_ex`)."""
    batch = {}
    for name, source in catalog.sources.items():
        deletes = [] if source.append_only else [rng.randrange(100) for _ in range(rng.randint(0, 3))]
        inserts = [
            tuple(rng.choice(VALUES[f.name]) for f in source.schema if f.name != "_ex")
            for _ in range(rng.randint(0, 4))
        ]
        batch[name] = (deletes, inserts)
    return batch


def random_examples(seed: int, catalog: Catalog, count: int) -> list[list[dict]]:
    """`count` examples of BATCHES batches each, from one seed: hypothesis draws the seed, Python's random the
    bulk (hypothesis's own draws of this much data would be slow, and shrinking is off anyway)."""
    rng = random.Random(seed)
    return [[random_batch(rng, catalog) for _ in range(BATCHES)] for _ in range(count)]


def apply(contents: Contents, example: int, batch: dict) -> dict[str, tuple[list[tuple], list[tuple]]]:
    """Apply one example's batch to `contents`; returns per source the rows deleted and inserted."""
    done = {}
    for name, (positions, inserted) in batch.items():
        rows = contents[name]
        mine = [r for r in rows if r[0] == example]
        deleted = []
        for p in positions:
            if mine:
                deleted.append(mine.pop(p % len(mine)))
        added = [(example, *r) for r in inserted]
        for r in deleted:
            rows.remove(r)
        rows.extend(added)
        done[name] = (deleted, added)
    return done


# -- running the rule and the oracle ----------------------------------------------------------------------


def frame(
    spark, catalog: Catalog, name: str, rows: list[tuple], weights: list[int] | None = None
) -> DataFrame:
    """A source's rows as a DataFrame; with `weights`, as a Z-set (`_w`, `_mtime`)."""
    return spark.createDataFrame(table_of(catalog, name, rows, weights))


def run_rule(
    spark,
    catalog: Catalog,
    view: str,
    state: MemoryState,
    before: Contents | None,
    done: dict[str, tuple[list[tuple], list[tuple]]],
    *,
    hand_off: bool = False,
) -> Counter:
    """The view's delta rule over one batch; `before` None: the first batch (from nothing, a bootstrap).
    `hand_off`: Spark's batch is finished on the driver from the first relation its upper rules keep
    (incremental/hand_off.py), which the view must have."""
    deltas = {
        name: frame(spark, catalog, name, deleted + inserted, [-1] * len(deleted) + [1] * len(inserted))
        for name, (deleted, inserted) in done.items()
    }
    readers = (
        None
        if before is None
        else {
            name: (lambda rows=rows, name=name: frame(spark, catalog, name, rows))
            for name, rows in before.items()
        }
    )
    moved = frozenset(name for name, (deleted, inserted) in done.items() if deleted or inserted)
    batch = Batch(spark, deltas, state, before=readers, moved=None if before is None else moved)
    plan = catalog.plans[view]
    if hand_off:
        nodes = driver_finishes(plan.root)
        assert nodes, f"{view}: no node of its plan may finish a Spark batch on the driver"
        batch.hand_off = HandOff(nodes, DriverBatch({}, state), 10**9)
    try:
        columns = [c.name for c in plan.columns]
        rows = view_delta(plan.root, batch)
        if hand_off:
            assert isinstance(rows, pa.Table), f"{view}: the batch was not handed to the driver"
        if isinstance(rows, pa.Table):
            table = consolidated(rows.select([*columns, WEIGHT, MTIME])).rename_columns(
                [*columns, WEIGHT, MTIME]
            )
            result = [dict(zip(table.column_names, r)) for r in zip(*[c.to_pylist() for c in table.columns])]
        else:
            result = [r.asDict() for r in consolidate(rows, columns).collect()]
        state.commit()
    finally:
        batch.release()
    return Counter({tuple(r[c] for c in columns): r[WEIGHT] for r in result})


def run_driver_rule(
    catalog: Catalog, view: str, state: MemoryState, before: Contents, done: dict[str, tuple[list, list]]
) -> Counter:
    """The view's delta rule on the driver over one batch (no Spark)."""
    deltas = {
        name: table_of(catalog, name, deleted + inserted, [-1] * len(deleted) + [1] * len(inserted))
        for name, (deleted, inserted) in done.items()
    }

    def read(name: str, where, within):
        rows = table_of(catalog, name, before[name])
        if where is not None:
            column, values = where
            rows = rows.filter(pc.is_in(rows.column(column), pc.unique(values)))
        if within is not None:
            column, low, high = within
            times = rows.column(column)
            rows = rows.filter(pc.and_(pc.greater_equal(times, low), pc.less_equal(times, high)))
        return rows

    moved = frozenset(name for name, (deleted, inserted) in done.items() if deleted or inserted)
    batch = DriverBatch(deltas, state, before=read, moved=moved)
    plan = catalog.plans[view]
    try:
        result = consolidated(view_delta_on_driver(plan.root, batch))
    except NotOnDriver as e:
        pytest.fail(f"{view}: the driver declined a batch it should compute ({e})")
    state.commit()
    return Counter({tuple(r[:-2]): r[-2] for r in zip(*[c.to_pylist() for c in result.columns])})


def table_of(catalog: Catalog, name: str, rows: list[tuple], weights: list[int] | None = None) -> pa.Table:
    """A source's rows as an Arrow table; with `weights`, as a Z-set (`_w`, `_mtime`)."""
    schema = catalog.sources[name].schema
    columns = [list(c) for c in zip(*rows)] if rows else [[] for _ in schema]
    if weights is not None:
        schema = schema.append(pa.field(WEIGHT, pa.int64())).append(
            pa.field(MTIME, pa.timestamp("us", tz="UTC"))
        )
        columns += [weights, [MTIME_VALUE] * len(weights)]
    return pa.Table.from_arrays([pa.array(c, f.type) for c, f in zip(columns, schema)], schema=schema)


def run_sql(spark, catalog: Catalog, view: str, contents: Contents) -> Counter:
    for name in catalog.sources:
        frame(spark, catalog, name, contents[name]).createOrReplaceTempView(name)
    plan = catalog.plans[view]
    return Counter(tuple(r) for r in spark.sql(plan.spark_sql).collect())


def check(spark, catalog: Catalog, view: str, examples: list[list[dict]], *, hand_off: bool = False) -> None:
    """Run every example's batches (side by side when the view carries `_ex`), comparing each batch's output
    delta with the change of the view's SQL. `hand_off`: Spark's batches are finished on the driver."""
    state = MemoryState(spark)
    contents: Contents = {name: [] for name in catalog.sources}
    old: Counter = Counter()
    side_by_side = view in SIDE_BY_SIDE
    for i in range(BATCHES):
        before = {name: list(rows) for name, rows in contents.items()}
        done: dict[str, tuple[list, list]] = {name: ([], []) for name in catalog.sources}
        for example, batches in enumerate(examples):
            for name, (deleted, inserted) in apply(contents, example, batches[i]).items():
                done[name][0].extend(deleted)
                done[name][1].extend(inserted)
        # Batch 0 starts from nothing, by Spark; then the driver, Spark with its small-batch form
        # (Batch.keep_small), and the driver again, each going on from the state the other form left.
        state.on_driver = i == 2
        if i % 2:
            delta = run_driver_rule(catalog, view, state, before, done)
        else:
            delta = run_rule(spark, catalog, view, state, None if i == 0 else before, done, hand_off=hand_off)
        with oracle():
            new = run_sql(spark, catalog, view, contents)
        expected = Counter(new)
        expected.subtract(old)
        expected = Counter({row: n for row, n in expected.items() if n})
        if delta != expected:
            wrong = sorted({row[0] for row in (delta - expected) + (expected - delta)}, key=str)
            example = wrong[0] if side_by_side else 0
            rows = {name: [r for r in rows if r[0] == example] for name, rows in before.items()}
            pytest.fail(
                f"{view}, batch {i}, example {example}: before the batch the sources held {rows}; the "
                f"batch deleted and inserted {batches_of(done, example)}; the rule emitted "
                f"{_of(delta, example, side_by_side)}, the SQL changed by {_of(expected, example, side_by_side)}"
            )
        old = new


def batches_of(done, example: int) -> dict:
    return {
        name: ([r for r in d if r[0] == example], [r for r in i if r[0] == example])
        for name, (d, i) in done.items()
    }


def _of(zset: Counter, example: int, side_by_side: bool) -> dict:
    return {row: n for row, n in zset.items() if not side_by_side or row[0] == example}


@pytest.mark.parametrize("view", list(SIDE_BY_SIDE))
@settings(
    max_examples=examples(2),  # each of SIDE random examples side by side
    deadline=None,
    phases=[Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(seed=st.integers(0, 2**32 - 1))
def test_delta_rule_output_is_the_change_of_its_sql(spark, catalog, view, seed):
    check(spark, catalog, view, random_examples(seed, catalog, SIDE))


@pytest.mark.parametrize("view", list(ONE_BY_ONE))
@settings(
    max_examples=examples(3),
    deadline=None,
    phases=[Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(seed=st.integers(0, 2**32 - 1))
def test_delta_rule_of_a_shape_without_ex(spark, catalog, view, seed):
    check(spark, catalog, view, random_examples(seed, catalog, 1))


# The views whose Spark batches may be finished on the driver (a rule over one input that keeps state, at the top)
HANDED_OFF = [
    "distinct_rows",
    "aggregate",
    "count_distinct",
    "multiset_of_group",
    "aggregate_having",
    "aggregate_append_only",
    "aggregate_global",
    "count_distinct_global",
]


@pytest.mark.parametrize("view", HANDED_OFF)
def test_a_spark_batch_finished_on_the_driver_is_the_change_of_its_sql(spark, catalog, view):
    """Spark's batches (the first from nothing, a bootstrap, then one with state) handed to the driver where
    their rules keep what they reduced the changes to (incremental/hand_off.py), the driver's own batches
    between them: each output delta the change of the view's SQL."""
    check(
        spark, catalog, view, random_examples(39, catalog, SIDE if view in SIDE_BY_SIDE else 1), hand_off=True
    )


def test_the_views_whose_spark_batches_the_driver_may_finish(catalog):
    """From the root down through rules of one input, to the lowest that keeps state: never a join, nor a view
    of rows alone."""
    finishing = {name for name, plan in catalog.plans.items() if driver_finishes(plan.root)}
    assert finishing == set(HANDED_OFF)
