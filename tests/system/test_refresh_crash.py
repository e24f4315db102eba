"""Exactly once under crashes (DESIGN.md §4): `mv refresh` runs in a child process that is killed with SIGKILL
(with its JVM) at every commit boundary of a DAG batch (before and after each view's state, snapshot,
key-revision and changelog commit: runtime/crash_points.py), and `mv refresh --continuous` at random moments,
while the sources change; after the next refresh, every view equals its SQL at the versions it records, and
replaying its changelog gives every snapshot version (so no change is lost or doubled). Two points more:
Spark's start inside a batch, and a `--continuous` batch committed before Spark's checkpoint recorded it."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from mvengine.config import load_config
from mvengine.project.catalog import load_catalog
from mvengine.runtime.crash_points import COMMITS, PROCESS_POINTS
from mvengine.runtime.refresh import Refresher, view_tables
from tests.conftest import NO_REGISTRATION
from tests.spark.test_refresh_differential import apply_commit, check_snapshot, check_view, make_project

# 12 kills at commit boundaries in the default run: each view killed at each of its four commits, before or
# after it by turns, so that every boundary kind (commit and side) is hit, in one view or two;
# `make test-long` (`pytest -m crash_long`) runs 200 through all 24 boundaries, half of them in batches computed
# by Spark, and MV_CRASH_KILLS (default 100) at random moments (a random moment mostly lands between commits,
# which the boundary kills already cover, and costs a wait of its own: 130 s for 6 of them in the default run
# before).
LONG_KILLS = int(os.environ.get("MV_CRASH_KILLS", "100"))
BOUNDARY_VIEWS = """
CREATE MATERIALIZED VIEW v_agg AS SELECT g, COUNT(*) AS n, SUM(v) AS s, MIN(v) AS lo FROM t GROUP BY g;
CREATE MATERIALIZED VIEW v_chain AS SELECT n, COUNT(*) AS groups, MAX(s) AS top FROM v_agg GROUP BY n;
CREATE MATERIALIZED VIEW v_bag AS SELECT g, v FROM b WHERE v IS NOT NULL;
"""


def start(project: Path) -> tuple[subprocess.Popen, threading.Event]:
    """The child, and an event set once it has committed a batch (it prints a line per batch)."""
    child = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "mv"),
            "--project",
            str(project),
            "refresh",
            "--continuous",
            "--interval",
            "200ms",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    working = threading.Event()

    def watch() -> None:
        for line in child.stdout:
            if "[stream]" in line:
                working.set()

    threading.Thread(target=watch, daemon=True).start()
    return child, working


def kill(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGKILL)  # the Python driver and its JVM together
    process.wait()


# Two views, so that a child gets through several batches between kills: a keyed aggregate (MIN/MAX multiset,
# DISTINCT aggregate, HAVING) and a bag (UNION ALL of a subquery and a filter).
VIEWS = """
CREATE MATERIALIZED VIEW v_agg AS
SELECT g, COUNT(*) AS n, SUM(v) AS s, MIN(v) AS lo, MAX(v) AS hi, COUNT(DISTINCT v) AS dv
FROM t GROUP BY g HAVING COUNT(*) > 0;
CREATE MATERIALIZED VIEW v_bag AS SELECT s FROM (SELECT g, SUM(v) AS s FROM b GROUP BY g) AS x WHERE s > 0
UNION ALL SELECT v AS s FROM b WHERE g = 'a';
"""


@pytest.mark.crash
@pytest.mark.crash_long
@pytest.mark.parametrize("kills", [LONG_KILLS], ids=["long"])
def test_views_survive_sigkill_at_random_moments(spark, tmp_path: Path, kills: int):
    rng = random.Random(20261122 + kills)
    project = make_project(tmp_path / "project", VIEWS)
    config = load_config(project)
    catalog = load_catalog(config)
    Refresher(spark, config, catalog).refresh()  # built before the first kill: the children run batches
    built = _versions(catalog)
    mid_work = 0
    for i in range(kills):
        child, working = start(project)
        started = time.monotonic()
        if i % 2:
            # A kill at any moment of a child's life: starting Spark, planning, or its first batches.
            deadline = started + rng.uniform(2, 20)
        else:
            # A kill after the child committed a batch, anywhere in the batches that follow (reading changes,
            # writing state, snapshot or changelog).
            while not working.is_set() and time.monotonic() - started < 90:
                apply_commit(spark, catalog, _random_commit(rng, i))
                time.sleep(rng.uniform(0.3, 1.5))
            mid_work += working.is_set()
            deadline = time.monotonic() + rng.uniform(0, 5)
        while time.monotonic() < deadline:
            apply_commit(spark, catalog, _random_commit(rng, i))
            time.sleep(rng.uniform(0.2, 1.0))
        kill(child)
    assert mid_work == (kills + 1) // 2, f"only {mid_work} children got to commit a batch before their kill"
    # The children committed batches between kills (so kills landed while work was under way)...
    committed = _versions(catalog) - built
    assert committed > 0, "the killed refreshes never committed a batch"
    print(
        f"{kills} kills, {mid_work} of them after the process had committed a batch; {committed} snapshot "
        "versions committed by the killed processes"
    )
    # ...and after one more refresh, every view keeps the promise.
    Refresher(spark, config, catalog).refresh()
    for name in catalog.plans:
        check_view(spark, catalog, name)


def _versions(catalog) -> int:
    return sum(view_tables(p, {}).snapshot.open().version() for p in catalog.plans.values())


def _random_commit(rng: random.Random, i: int):
    kind = rng.choice(["upsert_t", "delete_t", "insert_b", "delete_b"])
    group = rng.choice(["a", "b", "c", None])
    value = rng.choice([None, *range(-3, 6)])
    if kind == "upsert_t":
        return kind, [(rng.randrange(8), group, value)]
    if kind == "delete_t":
        return kind, [rng.randrange(8)]
    if kind == "insert_b":
        return kind, [(group, value), (rng.choice(["a", "b"]), i % 5)]
    return kind, (group, value)


@pytest.mark.crash
@pytest.mark.parametrize(
    "kills", [12, pytest.param(200, marks=pytest.mark.crash_long)], ids=["12-kills", "long"]
)
def test_views_survive_sigkill_at_every_commit_boundary(spark, tmp_path: Path, kills: int):
    rng = random.Random(20261123 + kills)
    project = make_project(tmp_path / "project", BOUNDARY_VIEWS)
    config = load_config(project)
    catalog = load_catalog(config)
    Refresher(spark, config, catalog).refresh()
    order = [p.name for p in catalog.views_to_refresh(None)]
    points = [
        f"{view}:{commit}:{when}" for view in order for commit in COMMITS for when in ("before", "after")
    ]
    if kills < len(points):  # the default run: view by view, each commit once, its side by turns
        points = [
            f"{order[i % len(order)]}:{COMMITS[i // len(order)]}:{('before', 'after')[i % 2]}"
            for i in range(len(order) * len(COMMITS))
        ]
        assert len(points) == kills and {p.split(":", 1)[1] for p in points} == {
            f"{commit}:{when}" for commit in COMMITS for when in ("before", "after")
        }
    conf = project / "conf" / "mvengine.toml"
    conf.parent.mkdir(exist_ok=True)
    for i in range(kills):
        point = points[i % len(points)]
        in_spark = i // len(points) % 2 == 1  # the long run's odd rounds: every batch computed by Spark
        conf.write_text(f"[refresh]\ndriver_max_changes = {0 if in_spark else 2_000_000}\n{NO_REGISTRATION}")
        # Changes that move every view: a new group's row in t (v_agg, and v_chain through it), a row of b.
        apply_commit(spark, catalog, ("upsert_t", [(i % 9, f"g{i}", rng.randrange(-3, 6))]))
        apply_commit(spark, catalog, ("insert_b", [(rng.choice(["a", "b"]), i)]))
        child = subprocess.run(
            [str(Path(sys.executable).parent / "mv"), "--project", str(project), "refresh"],
            env=dict(os.environ, MVENGINE_CRASH_AT=point),
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        assert child.returncode == -signal.SIGKILL, (
            f"kill {i} at {point} never came: {child.stdout}{child.stderr}"
        )
        Refresher(spark, config, catalog).refresh()  # finishes the killed batch, exactly
        for name in order:
            check_snapshot(spark, catalog, name)
    for name in order:
        check_view(spark, catalog, name)


@pytest.mark.crash
def test_views_survive_sigkill_at_spark_start_and_after_a_continuous_batch(spark, tmp_path: Path):
    """The two crash points that are not a view's commit (runtime/crash_points.py PROCESS_POINTS): Spark just
    started inside a batch that needs it (the lock held, nothing committed), and a `--continuous` batch that
    committed every view before Spark's checkpoint recorded it (the next query runs that batch again: the
    views must not take its changes twice)."""
    rng = random.Random(20261126)
    project = make_project(tmp_path / "project", BOUNDARY_VIEWS)
    config = load_config(project)
    catalog = load_catalog(config)
    Refresher(spark, config, catalog).refresh()
    conf = project / "conf" / "mvengine.toml"
    conf.parent.mkdir(exist_ok=True)
    conf.write_text(f"[refresh]\ndriver_max_changes = 0\n{NO_REGISTRATION}")  # this batch needs Spark
    mv = [str(Path(sys.executable).parent / "mv"), "--project", str(project), "refresh"]
    assert PROCESS_POINTS == ("spark:start:after", "continuous:batch:after")

    apply_commit(spark, catalog, ("upsert_t", [(0, "g0", 1)]))  # a new group: every view moves
    started = subprocess.run(
        mv,
        env=dict(os.environ, MVENGINE_CRASH_AT="spark:start:after"),
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert started.returncode == -signal.SIGKILL, started.stdout + started.stderr
    conf.write_text("")  # the batches after it on the driver (--continuous starts Spark all the same)

    child = subprocess.Popen(
        [*mv, "--continuous", "--interval", "200ms"],
        env=dict(os.environ, MVENGINE_CRASH_AT="continuous:batch:after"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        for line in child.stdout:  # its one-shot batch first (the commit above), then the query
            if line.startswith("pipeline query "):
                break
        apply_commit(spark, catalog, ("upsert_t", [(1, "g1", 2)]))
        for i in range(1, 4):
            apply_commit(spark, catalog, _random_commit(rng, i))
        assert child.wait(timeout=300) == -signal.SIGKILL, child.stderr.read()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)

    again = subprocess.Popen(  # its query runs the killed batch again, from Spark's checkpoint
        [*mv, "--continuous", "--interval", "200ms"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        for line in again.stdout:
            if line.startswith("pipeline query "):
                break
        time.sleep(2)
        again.send_signal(signal.SIGTERM)
        out, err = again.communicate(timeout=120)
        assert again.returncode == 0, err
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(again.pid, signal.SIGKILL)
    Refresher(spark, config, catalog).refresh()
    for name in catalog.plans:
        check_view(spark, catalog, name)
