"""A view's target_lag (issue 40): `mv refresh --continuous` refreshes it only as often as its freshness target,
or its readers, need; a one-shot refresh and the first batch of --continuous bring every view to the cut."""

from __future__ import annotations

import threading
import time

import pytest
from deltalake import DeltaTable

from mvengine.api import Project
from mvengine.config import load_config
from mvengine.errors import SqlError
from mvengine.project.catalog import load_catalog
from mvengine.reading.status import status
from mvengine.reading.versions import Versions
from mvengine.runtime.refresh import Refresher, view_tables
from mvengine.runtime.target_lag import becomes_due, due_views
from tests.spark import test_refresh_differential as differential

VIEWS = """
CREATE MATERIALIZED VIEW fast AS SELECT g, COUNT(*) AS n FROM t GROUP BY g;
CREATE MATERIALIZED VIEW slow WITH ('target_lag' = '1 hour') AS SELECT COUNT(*) AS n FROM t;
CREATE MATERIALIZED VIEW base WITH ('target_lag' = 'downstream') AS SELECT k, v FROM t WHERE v > 0;
CREATE MATERIALIZED VIEW top WITH ('target_lag' = '1 minute') AS SELECT SUM(v) AS s FROM base;
"""


def _setup(spark, tmp_path, views: str = VIEWS):
    root = differential.make_project(tmp_path, views)
    config = load_config(root)
    catalog = load_catalog(config)
    Refresher(spark, config, catalog).refresh()
    return config, catalog


def test_which_views_a_batch_refreshes_follows_their_target_lag_and_their_readers(spark, tmp_path):
    config, catalog = _setup(spark, tmp_path)
    differential.apply_commit(spark, catalog, ("upsert_t", [(1, "a", 3)]))
    t = DeltaTable(catalog.sources["t"].path)
    committed = t.history(1)[0]["timestamp"]
    plans = [catalog.plans[n] for n in catalog.order if n in catalog.plans]

    def due(after_s: float) -> dict[str, bool]:
        return due_views(plans, catalog, {}, now_ms=committed + int(after_s * 1000), interval_ms=1000)

    assert due(10) == {"fast": True, "slow": False, "base": False, "top": False}
    assert due(59.5) == {"fast": True, "slow": False, "base": True, "top": True}  # (within one interval)
    assert due(3600) == {"fast": True, "slow": True, "base": True, "top": True}
    assert becomes_due(catalog.plans["top"], catalog, {}, interval_ms=1000) == committed + 59_000
    assert becomes_due(catalog.plans["base"], catalog, {}, interval_ms=1000) is None  # (its reader decides)
    # mv status: each view's target and whether its lag passed it.
    rows = {s.name: s for s in status(Versions(config, catalog)) if s.kind == "view"}
    assert (rows["slow"].target_lag, rows["slow"].behind_target) == (3600.0, False)
    assert (rows["base"].target_lag, rows["base"].behind_target) == ("downstream", None)
    assert rows["fast"].target_lag is None


def test_continuous_refreshes_a_view_when_its_target_lag_comes_due_and_not_before(spark, tmp_path):
    views = VIEWS.replace("'1 minute'", "'3 seconds'")
    config, catalog = _setup(spark, tmp_path, views)
    project = Project(config, spark=spark)
    reports = []
    stop = threading.Event()
    failure: list[BaseException] = []

    def keep_fresh() -> None:
        try:
            project.refresh(interval_s=0.2, stopping=stop.is_set, on_batch=reports.append)
        except BaseException as e:  # reported by the test thread
            failure.append(e)

    def version(name: str) -> int:
        return view_tables(catalog.plans[name], {}).snapshot.open().version()

    before = {n: version(n) for n in catalog.plans}
    runner = threading.Thread(target=keep_fresh, daemon=True)
    runner.start()
    try:
        time.sleep(1)  # (its first batch: nothing moved)
        differential.apply_commit(spark, catalog, ("upsert_t", [(1, "a", 3)]))
        deadline = time.monotonic() + 120
        while version("top") == before["top"] and not failure and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not failure, failure
        # top came due with no further commit (a timer); base, which it reads, moved with it; slow did not.
        assert version("top") == before["top"] + 1 and version("base") == before["base"] + 1
        assert version("fast") == before["fast"] + 1
        assert version("slow") == before["slow"], [r.line() for r in reports]
    finally:
        stop.set()
        runner.join(timeout=120)
    assert not failure, failure
    for name in ("fast", "base", "top"):
        differential.check_view(spark, catalog, name)


@pytest.mark.parametrize("value", ["0 seconds", "soon"])
def test_a_target_lag_that_is_no_duration_is_a_located_error(tmp_path, value):
    root = differential.make_project(
        tmp_path, f"CREATE MATERIALIZED VIEW x WITH ('target_lag' = '{value}') AS SELECT k FROM t;\n"
    )
    with pytest.raises(SqlError, match="target_lag") as failed:
        load_catalog(load_config(root))
    assert failed.value.hint
