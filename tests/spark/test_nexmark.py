"""The Nexmark example (examples/nexmark): every query is planned incremental, and after batches of Nexmark's
event stream (mvengine/nexmark.py, as `mv demo` writes it) every view equals its SQL run by Spark over its
inputs at the versions it records, and its changelog replays to its snapshot. q12 windows processing time
(PROCTIME(): when a row arrived), which its SQL run again cannot know; it is checked against its changelog only."""

from __future__ import annotations

import shutil
from pathlib import Path

from mvengine.config import load_config
from mvengine.nexmark import NexmarkFeed
from mvengine.project.catalog import load_catalog
from mvengine.runtime.refresh import Refresher, view_tables
from mvengine.storage.api import read_table
from mvengine.storage.tables import TableRef
from tests.spark.test_refresh_claims import check_changelog_kind
from tests.spark.test_refresh_differential import check_changelog, check_view

EXAMPLE = Path(__file__).parent.parent.parent / "examples" / "nexmark"


def project(root: Path) -> Path:
    shutil.copytree(EXAMPLE / "views", root / "views")
    return root


def test_every_nexmark_query_is_planned_incremental(tmp_path):
    plans = load_catalog(load_config(project(tmp_path))).plans
    assert {n: p.strategy for n, p in plans.items()} == {n: "incremental" for n in plans}
    assert {f"q{i}" for i in range(23)} <= set(plans)
    kinds = {n: plans[n].changelog for n in ("q0", "q9", "q18", "q19")}
    assert kinds == {"q0": "append-only", "q9": "upsert", "q18": "upsert", "q19": "retract"}
    assert plans["q18"].key == ("bidder", "auction")  # one row per partition


def test_nexmark_views_equal_their_sql(spark, tmp_path):
    config = load_config(project(tmp_path))
    catalog = load_catalog(config)
    feed = NexmarkFeed(config, catalog, seed=3, interval=0.5, rate=600)
    feed.start()
    refresher = Refresher(spark, config, catalog)
    for _ in range(2):  # a bootstrap, then an incremental batch of every query
        feed.next_batch()
        refresher.refresh()
    for name in catalog.plans:
        if name == "q12":
            check_changelog(spark, catalog, name)
        else:
            check_view(spark, catalog, name)
        check_changelog_kind(spark, catalog, name)
    bids = read_table(spark, TableRef(catalog.sources["bid"].path)).count()
    counted = read_table(spark, view_tables(catalog.plans["q12"], {}).snapshot).agg({"bid_count": "sum"})
    assert counted.collect()[0][0] == bids  # every bid in one processing-time window of its bidder
