"""The one streaming query over the view DAG (runtime/pipeline.py): a batch that stops between two views'
commits is finished to exactly its cut, every committed batch of every view reflects one version of each
source, and `--continuous` keeps one query alive, picking up new commits and new views."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from mvengine.api import Project
from mvengine.config import load_config
from mvengine.errors import MvError
from mvengine.project.catalog import load_catalog
from mvengine.reading.versions import Versions
from mvengine.runtime.refresh import Refresher, view_tables
from tests.conftest import NO_REGISTRATION
from tests.spark import test_refresh_differential as differential

CHAIN = """
CREATE MATERIALIZED VIEW sums AS SELECT g, SUM(v) AS s, COUNT(*) AS n FROM t GROUP BY g;
CREATE MATERIALIZED VIEW big AS SELECT g, s FROM sums WHERE n > 0;
"""

DIAMOND = """
CREATE MATERIALIZED VIEW counts AS SELECT g, COUNT(*) AS n FROM t GROUP BY g;
CREATE MATERIALIZED VIEW sums AS SELECT g, SUM(v) AS s FROM t GROUP BY g;
CREATE MATERIALIZED VIEW both_sides AS SELECT c.g, c.n, s.s FROM counts c JOIN sums s ON c.g = s.g;
"""


class Crash(Exception):
    """Stands for the process dying: raised inside the pipeline's batch, after a view committed."""


def test_a_batch_stopped_between_two_views_is_finished_to_its_cut(spark, tmp_path):
    root = differential.make_project(tmp_path, CHAIN)
    config = load_config(root)
    catalog = load_catalog(config)
    Refresher(spark, config, catalog).refresh()
    differential.apply_commit(spark, catalog, ("upsert_t", [(1, "a", 4), (2, "b", 5)]))
    crash_cut = Versions(config, catalog).latest("t")

    def crash_after_sums(report) -> None:
        if report.view == "sums" and report.kind == "stream":
            raise Crash("killed after sums committed, before big")

    with pytest.raises(Crash):
        Refresher(spark, config, catalog, report=crash_after_sums).refresh()
    versions = Versions(config, catalog)
    assert versions.source_versions("sums", versions.latest("sums")) == {"t": [crash_cut]}
    assert versions.source_versions("big", versions.latest("big")) == {"t": [crash_cut - 1]}
    # A new commit lands before the restart: the restart first finishes the interrupted batch at its own cut,
    # then moves every view on to the new one.
    differential.apply_commit(spark, catalog, ("delete_t", [1]))
    reports = []
    Refresher(spark, config, catalog, report=reports.append).refresh()
    assert [(r.view, r.inputs) for r in reports][:1] == [("big", {"sums": versions.latest("sums")})]
    versions = Versions(config, catalog)
    big = [versions.source_versions("big", v)["t"] for v in sorted(versions.snapshot_commits("big"))]
    assert big[-2:] == [[crash_cut], [crash_cut + 1]], big
    for name in catalog.plans:
        differential.check_view(spark, catalog, name)


# A refresh in a child process that dies by SIGKILL (no `finally`, no cleanup) right after view `sums`
# committed its batch, before `big` moved.
KILLED_AFTER_SUMS = """
import os, signal, sys
from mvengine.api import Project

def report(r):
    if r.view == "sums" and r.kind == "stream":
        os.kill(os.getpid(), signal.SIGKILL)

Project.open(sys.argv[1]).refresh(on_batch=report)
"""


def test_a_refresh_killed_between_two_views_is_finished_to_its_cut(spark, tmp_path):
    root = differential.make_project(tmp_path, CHAIN)
    config = load_config(root)
    catalog = load_catalog(config)
    Refresher(spark, config, catalog).refresh()
    differential.apply_commit(spark, catalog, ("upsert_t", [(1, "a", 4), (2, "b", 5)]))
    cut = Versions(config, catalog).latest("t")
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_AFTER_SUMS, str(root)], capture_output=True, text=True, timeout=600
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    versions = Versions(config, catalog)
    assert versions.source_versions("sums", versions.latest("sums")) == {"t": [cut]}
    assert versions.source_versions("big", versions.latest("big")) == {"t": [cut - 1]}
    differential.apply_commit(spark, catalog, ("upsert_t", [(3, "a", 1)]))
    reports = []
    Refresher(spark, config, catalog, report=reports.append).refresh()
    versions = Versions(config, catalog)
    big = [versions.source_versions("big", v)["t"] for v in sorted(versions.snapshot_commits("big"))]
    assert big[-2:] == [[cut], [cut + 1]], big  # first exactly the killed batch's cut, then the new one
    for name in catalog.plans:
        differential.check_view(spark, catalog, name)


def test_continuous_keeps_one_query_and_commits_one_cut_per_batch(spark, tmp_path):
    """Source commits land while `refresh --continuous` runs (in a thread, as `mv refresh --continuous` runs
    it): each reaches the whole diamond without a new streaming query, and no committed version of the view
    that joins two paths ever reflects two versions of the source."""
    root = differential.make_project(tmp_path, DIAMOND)
    config = load_config(root)
    catalog = load_catalog(config)
    project = Project(config, spark=spark)
    notices: list[str] = []
    reports = []
    stop = threading.Event()
    failure: list[BaseException] = []

    def keep_fresh() -> None:
        try:
            project.refresh(
                interval_s=0.2, stopping=stop.is_set, on_batch=reports.append, on_notice=notices.append
            )
        except BaseException as e:  # reported by the test thread
            failure.append(e)

    def reached(version: int) -> bool:
        if not any(r.view == "both_sides" for r in reports):
            return False  # not built yet
        versions = Versions(config, catalog)
        return versions.source_versions("both_sides", versions.latest("both_sides")) == {"t": [version]}

    Refresher(spark, config, catalog).prepare_sources()  # the first commit may come before the first batch
    runner = threading.Thread(target=keep_fresh, daemon=True)
    runner.start()
    try:
        commits = [
            ("upsert_t", [(1, "a", 1), (2, "b", 2)]),
            ("upsert_t", [(3, "a", 5)]),
            ("delete_t", [1]),
            ("upsert_t", [(2, "a", 7), (4, None, 3)]),
        ]
        for commit in commits:
            differential.apply_commit(spark, catalog, commit)
            version = Versions(config, catalog).latest("t")
            deadline = time.monotonic() + 120
            while not reached(version) and not failure and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not failure, failure
            assert reached(version), f"both_sides never reached t@{version}: {[r.line() for r in reports]}"
    finally:
        stop.set()
        runner.join(timeout=120)
    assert not failure, failure
    started = [n for n in notices if n.startswith("pipeline query ")]
    assert len(started) == 1, notices  # one query for all four commits
    batches = [r for r in reports if r.view == "both_sides" and r.kind == "stream"]
    assert len(batches) >= len(commits) - 1, [r.line() for r in reports]
    versions = Versions(config, catalog)
    for version in versions.snapshot_commits("both_sides"):
        assert len(versions.source_versions("both_sides", version)["t"]) == 1, version
    for name in catalog.plans:
        differential.check_view(spark, catalog, name)


def test_a_view_over_a_view_takes_its_upstreams_changes_from_memory(spark, tmp_path):
    """The upstream's changes of the batch are handed over in memory: the downstream's batch reads no change
    feed (its read phase runs no Spark job) and counts the upstream's changelog rows as its changes in."""
    root = differential.make_project(tmp_path, CHAIN)
    config = load_config(root)
    catalog = load_catalog(config)
    refresher = Refresher(spark, config, catalog)
    refresher.refresh()
    differential.apply_commit(spark, catalog, ("upsert_t", [(1, "a", 4), (2, "b", 5), (3, "a", 1)]))
    reports = []
    Refresher(spark, config, catalog, report=reports.append).refresh()
    sums, big = reports
    assert (sums.view, big.view) == ("sums", "big")
    assert big.rows_in == sums.rows_out == 2  # two new groups
    read = next(p for p in big.phases if p.name == "read changes")
    assert read.jobs == 0, big.profile()
    for name in catalog.plans:
        differential.check_view(spark, catalog, name)


def test_refresh_with_nothing_to_do_starts_no_spark(spark, tmp_path: Path):
    root = differential.make_project(tmp_path, CHAIN)
    # (The tests' Spark keeps its catalog in memory and registers nothing: with the project's own, the idle
    # refresh would start Spark once, to register the views in the metastore.)
    (root / "conf").mkdir(exist_ok=True)
    (root / "conf" / "mvengine.toml").write_text(NO_REGISTRATION)
    assert Project.open(root).stale() == ["sums", "big"]  # never refreshed
    Project.open(root, spark=spark).refresh()
    idle = Project.open(root)
    assert idle.stale() == [] and idle.refresh() == []
    assert idle._spark is None  # answered from the Delta logs
    differential.apply_commit(spark, idle.catalog, ("upsert_t", [(1, "a", 2)]))
    assert idle.stale() == ["sums", "big"]


def test_auto_policy_recomputes_a_batch_that_changes_most_of_the_inputs(spark, tmp_path):
    root = differential.make_project(tmp_path, CHAIN)
    (root / "conf").mkdir(exist_ok=True)
    (root / "conf" / "mvengine.toml").write_text(
        "[refresh]\nrecompute_above = 0.3\nrecompute_min_changes = 1\n"
    )
    config = load_config(root)
    catalog = load_catalog(config)
    Refresher(spark, config, catalog).refresh()
    differential.apply_commit(spark, catalog, ("upsert_t", [(k, "ab"[k % 2], k) for k in range(10)]))
    reports = []
    Refresher(spark, config, catalog, report=reports.append).refresh()
    sums = next(r for r in reports if r.view == "sums")
    assert sums.kind == "bootstrap" and sums.note.startswith(
        "recomputed by cost: 10 changes are 100% of the inputs' 10 rows, above recompute_above 0.3"
    ), sums.line()
    differential.apply_commit(spark, catalog, ("upsert_t", [(1, "a", 9)]))  # 2 change rows of 10: 20%
    reports.clear()
    Refresher(spark, config, catalog, report=reports.append).refresh()
    # sums applies its delta rule; big, over sums' 2 rows, gets 4 changes (both groups updated): recomputed.
    assert [(r.view, r.kind) for r in reports] == [("sums", "stream"), ("big", "bootstrap")], reports
    assert reports[1].note.startswith("recomputed by cost: 4 changes are 200% of the inputs' 2 rows")
    for name in catalog.plans:
        differential.check_view(spark, catalog, name)


def test_auto_policy_appends_an_insert_only_batch_of_a_row_by_row_view(spark, tmp_path):
    """A view whose rows each come of one input row appends a batch of inserts, however large a share of its
    inputs; a batch that deletes is still recomputed by cost."""
    root = differential.make_project(
        tmp_path, "CREATE MATERIALIZED VIEW kept AS SELECT k, upper(g) AS g FROM t WHERE v >= 0;"
    )
    (root / "conf").mkdir(exist_ok=True)
    (root / "conf" / "mvengine.toml").write_text(
        "[refresh]\nrecompute_above = 0.3\nrecompute_min_changes = 1\n"
    )
    config = load_config(root)
    catalog = load_catalog(config)
    Refresher(spark, config, catalog).refresh()
    reports = []
    for commit in [("upsert_t", [(k, "ab"[k % 2], k) for k in range(10)]), ("delete_t", range(6))]:
        differential.apply_commit(spark, catalog, commit)
        Refresher(spark, config, catalog, report=reports.append).refresh()
        differential.check_view(spark, catalog, "kept")
    assert [r.kind for r in reports] == ["stream", "bootstrap"], [r.line() for r in reports]
    assert reports[1].note.startswith("recomputed by cost: 6 changes are 150% of the inputs' 4 rows")


def test_issue_43_a_helper_views_empty_batch_is_a_version_the_cost_check_can_read(spark, tmp_path):
    """A join input that aggregates is a helper view (q7__b1); in a batch where its output does not change (new
    bids below the highest), its snapshot commit still makes a version, and the next view's cost check, which
    reads the helper at that version in the same pipeline batch, finds it (it found a handle left at the version
    before: "q7__b1 has no version 3; versions are 0..2")."""
    import datetime as dt

    import pyarrow as pa
    from deltalake import write_deltalake

    from mvengine.storage.tables import TableRef

    differential.make_project(tmp_path, "")
    (tmp_path / "views" / "sources.sql").write_text(
        "CREATE TABLE bid (auction BIGINT, price BIGINT, ts TIMESTAMP) WITH ('append_only' = 'true');\n"
    )
    (tmp_path / "views" / "views.sql").write_text(
        "CREATE MATERIALIZED VIEW q7 AS SELECT b.auction, b.price FROM bid AS b\n"
        "JOIN (SELECT MAX(price) AS maxprice FROM bid) AS b1 ON b.price = b1.maxprice;\n"
    )
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "mvengine.toml").write_text("[refresh]\nrecompute_min_changes = 1\n")
    config = load_config(tmp_path)
    catalog = load_catalog(config)
    uri = TableRef(catalog.sources["bid"].path).uri

    def bids(prices: list[int]) -> None:
        write_deltalake(
            uri,
            pa.table(
                {
                    "auction": pa.array(range(len(prices)), pa.int64()),
                    "price": pa.array(prices, pa.int64()),
                    "ts": pa.array([dt.datetime(2026, 1, 1, tzinfo=dt.UTC)] * len(prices)),
                }
            ),
            mode="append",
            configuration={"delta.enableChangeDataFeed": "true"},
        )

    bids([5, 9, 2])
    refresher = Refresher(spark, config, catalog)
    refresher.refresh()
    for prices in ([10, 1], [3, 4], [7]):  # the highest bid moves, then twice it does not
        bids(prices)
        refresher.refresh()
        versions = Versions(config, catalog)
        assert versions.latest("q7__b1") == versions.latest("q7")  # one version per batch, each view
        for name in catalog.plans:
            differential.check_view(spark, catalog, name)


def test_views_that_do_not_read_each_other_commit_side_by_side(spark, tmp_path):
    """A view computed on the driver commits on a thread while the next view is computed
    (runtime/background_commits.py). The view that reads both waits for their commits. A commit that fails
    fails the batch as its own view's failure, and the next refresh finishes the batch to its cut."""
    root = differential.make_project(tmp_path, DIAMOND)
    config = load_config(root)
    catalog = load_catalog(config)
    Refresher(spark, config, catalog).refresh()
    differential.apply_commit(spark, catalog, ("upsert_t", [(1, "a", 4), (2, "b", 5)]))
    reports = []
    Refresher(spark, config, catalog, report=reports.append).refresh()
    assert [(r.view, r.engine) for r in reports] == [
        ("counts", "driver"),
        ("sums", "driver"),
        ("both_sides", "driver"),
    ]  # (the batch lines in DAG order, each once its commits are done; the views are checked at the end)

    # Another writer replaces counts's changelog with a table of other columns: its last commit fails.
    changelog = view_tables(catalog.plans["counts"], config.storage_options).changelog
    good = DeltaTable(changelog.uri).version()
    write_deltalake(changelog.uri, pa.table({"x": [1]}), mode="overwrite", schema_mode="overwrite")
    differential.apply_commit(spark, catalog, ("upsert_t", [(3, "c", 1)]))
    cut = Versions(config, catalog).latest("t")
    with pytest.raises(MvError, match="changelog") as failed:
        Refresher(spark, config, catalog).refresh()
    assert "counts" in str(failed.value), failed.value
    versions = Versions(config, catalog)
    # counts's snapshot committed before its changelog failed; sums, computed meanwhile, committed whole;
    # both_sides waited for counts and never started.
    assert versions.source_versions("counts", versions.latest("counts")) == {"t": [cut]}
    assert versions.source_versions("sums", versions.latest("sums")) == {"t": [cut]}
    assert versions.source_versions("both_sides", versions.latest("both_sides")) == {"t": [cut - 1]}

    DeltaTable(changelog.uri).restore(good)
    differential.apply_commit(spark, catalog, ("delete_t", [1]))
    Refresher(spark, config, catalog).refresh()
    versions = Versions(config, catalog)
    sides = [
        versions.source_versions("both_sides", v)["t"]
        for v in sorted(versions.snapshot_commits("both_sides"))
    ]
    assert sides[-2:] == [[cut], [cut + 1]], sides  # first exactly the failed batch's cut, then the new one
    for name in catalog.plans:
        differential.check_view(spark, catalog, name)
