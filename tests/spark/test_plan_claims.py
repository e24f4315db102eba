"""The plan's claims hold for every view of the golden corpus (tests/plans/cases), under random changes.

`mv plan` claims, per view, a changelog kind and a key; views over it trust those claims (a MIN/MAX over an
append-only view keeps only the current extreme, a keyed view is upserted by key). Here the views are not
refreshed by mvengine: each one's SQL is run by Spark over the sources after every step of a random change
sequence (inserts on append-only sources; inserts, updates and deletes by key on the others), and each claim
is checked against what the SQL gives:

- append-only: every row of the previous result is still there (as a bag), so an exact changelog of the view
  holds `+I` rows only, and a MIN/MAX over it can never see a retraction;
- a key: no two rows share it, at every step, so an upsert changelog holds at most one old and one new row per
  key per version.

This is what the changelog of any exact maintenance must contain; tests/spark/test_refresh_claims.py checks the real
changelogs of refreshed views, and a downstream MIN/MAX over them, for random cases of the corpus.
"""

from __future__ import annotations

import datetime as dt
import shutil
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from mvengine.config import load_config
from mvengine.project.catalog import Catalog, load_catalog
from mvengine.sql.sources import SourceDef
from tests.conftest import examples

PLANS = Path(__file__).parent.parent / "plans"
CASES = sorted(p for p in (PLANS / "cases").iterdir() if p.suffix == ".sql" and not p.name.startswith("e"))


def corpus_catalog(case: Path, root: Path) -> Catalog:
    """The catalog of one corpus case: the shared sources and the case's views."""
    (root / "views").mkdir(parents=True)
    shutil.copy(PLANS / "sources.sql", root / "views" / "_sources.sql")
    shutil.copy(case, root / "views" / case.name)
    return load_catalog(load_config(root))


# Few distinct values, so that joins match, groups collide and keys come back.
_VALUES = {
    pa.types.is_integer: st.integers(1, 4),
    pa.types.is_floating: st.sampled_from([1.5, 50.0, 150.0]),
    pa.types.is_decimal: st.sampled_from([Decimal("1.50"), Decimal("20.00"), Decimal("99.99")]),
    pa.types.is_string: st.sampled_from(["a", "b", "FR", "US"]),
    pa.types.is_timestamp: st.sampled_from([dt.datetime(2026, 1, 1, h, tzinfo=dt.UTC) for h in (1, 2, 3)]),
}


def value(field: pa.Field, key: bool) -> st.SearchStrategy:
    if pa.types.is_list(field.type):
        base = st.lists(value(field.type.value_field, False), max_size=2)
    else:
        base = next(s for test, s in _VALUES.items() if test(field.type))
    return base if key or not field.nullable else st.one_of(st.none(), base)


def row(source: SourceDef) -> st.SearchStrategy:
    key = set(source.key or ())
    return st.tuples(*[value(f, f.name in key) for f in source.schema])


def commit(source: SourceDef) -> st.SearchStrategy:
    """One commit to a source: inserts (append-only sources), or upserts and deletes by key, or inserts and
    deletes of whole rows (bags)."""
    inserts = st.tuples(st.just(source.name), st.just("put"), st.lists(row(source), min_size=1, max_size=4))
    if source.append_only:
        return inserts
    # A delete names rows by position (modulo the rows there are), so that it always hits one.
    return st.one_of(
        inserts,
        st.tuples(
            st.just(source.name), st.just("delete"), st.lists(st.integers(0, 99), min_size=1, max_size=2)
        ),
    )


class Sources:
    """The sources' rows in memory, as lists (keyed ones with one row per key)."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.rows: dict[str, list[tuple]] = {name: [] for name in catalog.sources}

    def apply(self, name: str, kind: str, rows: list) -> None:
        source = self.catalog.sources[name]
        current = self.rows[name]
        if kind == "delete":  # rows: positions; a bag loses every copy of the row named
            for position in rows:
                if current:
                    gone = current[position % len(current)]
                    current[:] = [r for r in current if r != gone]
        elif source.key:  # a put replaces the row of its key
            at = [source.schema.names.index(k) for k in source.key]
            by_key = {tuple(r[i] for i in at): r for r in current}
            by_key.update((tuple(r[i] for i in at), r) for r in rows)
            current[:] = by_key.values()
        else:
            current.extend(rows)

    def register(self, spark) -> None:
        for name, source in self.catalog.sources.items():
            columns = list(zip(*self.rows[name])) if self.rows[name] else [[] for _ in source.schema]
            table = pa.Table.from_arrays(
                [pa.array(c, f.type) for c, f in zip(columns, source.schema)], schema=source.schema
            )
            spark.createDataFrame(table).createOrReplaceTempView(name)


def results(spark, catalog: Catalog) -> dict[str, list]:
    """Every view's rows, computed in DAG order (a view over a view reads the rows computed for it)."""
    out = {}
    for name in catalog.order:
        plan = catalog.plans.get(name)
        if plan is None:
            continue
        df = spark.sql(plan.spark_sql).toDF(*[c.name for c in plan.columns])
        rows = df.collect()
        out[name] = rows
        spark.createDataFrame(rows, df.schema).createOrReplaceTempView(name)
    return out


def check_claims(catalog: Catalog, before: dict[str, list] | None, after: dict[str, list]) -> None:
    for name, rows in after.items():
        plan = catalog.plans[name]
        if plan.key is not None:
            at = [[c.name for c in plan.columns].index(k) for k in plan.key]
            keys = Counter(repr(tuple(r[i] for i in at)) for r in rows)
            repeated = [k for k, n in keys.items() if n > 1]
            assert not repeated, f"{name}: key ({', '.join(plan.key)}) is claimed but repeats: {repeated[:3]}"
        if plan.changelog == "append-only" and before is not None:
            lost = Counter(repr(tuple(r)) for r in before[name]) - Counter(repr(tuple(r)) for r in rows)
            assert not lost, f"{name}: claimed append-only, but rows went away: {list(lost)[:3]}"


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_claims_hold_under_random_changes(spark, tmp_path_factory, case: Path) -> None:
    catalog = corpus_catalog(case, tmp_path_factory.mktemp("claims"))
    # A step commits to every source (up to twice), so that each one's changes meet the others'.
    step = st.tuples(*[st.lists(commit(s), min_size=1, max_size=2) for s in catalog.sources.values()]).map(
        lambda per_source: [c for commits in per_source for c in commits]
    )

    # Each step costs one Spark query per view: one example of four steps per case of the corpus (64 cases),
    # ten nightly; no shrinking (a failure shows the generated steps).
    @settings(
        max_examples=examples(1),
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(steps=st.lists(step, min_size=4, max_size=4))
    def run(steps) -> None:
        sources = Sources(catalog)
        before = None
        for step in steps:
            for name, kind, rows in step:
                sources.apply(name, kind, rows)
            sources.register(spark)
            after = results(spark, catalog)
            check_claims(catalog, before, after)
            before = after

    run()
