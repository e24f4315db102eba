"""`mv status`: every source and view at a glance, from the Delta logs and the pipeline's files alone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from mvengine import Project
from mvengine.errors import MvError
from mvengine.reading.status import status
from mvengine.runtime.lock import refresh_lock
from mvengine.runtime.pipeline_files import pipeline_folder
from tests.conftest import write_project
from tests.system.test_cli import BIN

SOURCES = """
CREATE TABLE scores (team STRING, score INT,
  CONSTRAINT positive EXPECT (score > 0) ON VIOLATION FAIL UPDATE) WITH ('append_only' = 'true');
"""
VIEWS = """
CREATE MATERIALIZED VIEW totals AS SELECT team, SUM(score) AS total FROM scores GROUP BY team;
CREATE MATERIALIZED VIEW ranked AS SELECT team, total, RANK() OVER (ORDER BY total DESC) AS r FROM totals;
"""


def append(project: Project, rows: list[tuple[str, int]]) -> None:
    write_deltalake(
        project.catalog.sources["scores"].path,
        pa.table(
            {
                "team": pa.array([r[0] for r in rows], pa.string()),
                "score": pa.array([r[1] for r in rows], pa.int32()),
            }
        ),
        mode="append",
    )


def by_name(project: Project) -> dict:
    return {s.name: s for s in status(project.versions())}


def test_status_follows_versions_lag_batches_and_trouble(tmp_path, spark):
    root = write_project(tmp_path / "p", SOURCES, VIEWS)
    project = Project.open(root, spark=spark)
    before = by_name(project)
    assert before["scores"].version is None and "does not exist yet" in before["scores"].problem
    assert before["totals"].problem == "never refreshed" and before["totals"].stale
    assert before["ranked"].strategy == "full" and before["ranked"].reason

    project.refresh()
    append(project, [("red", 3), ("blue", 4)])
    time.sleep(0.1)
    behind = by_name(project)
    assert (behind["totals"].version, behind["totals"].behind) == (0, 1) and behind["totals"].stale
    assert behind["totals"].lag_s > 0 and behind["ranked"].behind == 1  # through totals
    assert behind["scores"].version == 1 and behind["scores"].rows == 2

    reports = {r.view: r for r in project.refresh()}
    after = by_name(project)
    totals = after["totals"]
    # issue 35, item 13: the ms column is the batch line's number (both the time until the snapshot commit)
    assert totals.batch_ms == reports["totals"].millis and f"{totals.batch_ms} ms" in reports["totals"].line()
    assert (totals.version, totals.behind, totals.lag_s, totals.stale) == (1, 0, 0.0, False)
    assert (totals.rows_in, totals.rows_out, totals.rows, totals.engine) == (2, 2, 2, "driver")
    assert totals.batch_ms >= 0 and totals.state_bytes > 0 and totals.problem is None
    assert after["ranked"].rows_in is None and after["ranked"].rows == 2  # recomputed: reads its input whole

    with refresh_lock(pipeline_folder(project.config.warehouse), ["totals"]):
        held = by_name(project)
    assert held["totals"].problem.startswith(f"being refreshed by process {os.getpid()} since ")
    assert held["ranked"].problem is None  # the holder names the views it refreshes
    assert by_name(project)["totals"].problem is None  # released

    append(project, [("red", -1)])
    with pytest.raises(MvError, match="expectation positive"):
        project.refresh()
    failed = by_name(project)
    assert failed["totals"].problem.startswith(
        "last batch failed: expectation positive (ON VIOLATION FAIL UPDATE)"
    )
    assert failed["totals"].stale and failed["totals"].version == 1


def test_mv_status_prints_a_table_json_and_watches_until_ctrl_c(tmp_path, spark):
    root = write_project(tmp_path / "p", SOURCES, VIEWS)
    Project.open(root, spark=spark).refresh()
    mv = [str(BIN / "mv"), "--project", str(root), "status"]
    table = subprocess.run(mv, capture_output=True, text=True, timeout=60, check=False)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == [
        "name",
        "kind",
        "strategy",
        "version",
        "behind",
        "lag_s",
        "last",
        "in",
        "out",
        "ms",
        "rows",
        "state",
        "note",
    ]
    assert [line.split()[:4] for line in lines[1:]] == [
        ["scores", "source", "-", "0"],
        ["totals", "view", "incremental", "0"],
        ["ranked", "view", "full", "0"],
    ]
    listed = subprocess.run([*mv, "--json"], capture_output=True, text=True, timeout=60, check=False)
    document = json.loads(listed.stdout)
    assert [(d["name"], d["behind"]) for d in document] == [("scores", None), ("totals", 0), ("ranked", 0)]
    watch = subprocess.Popen(
        [*mv, "--watch", "--interval", "200ms"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, COLUMNS="160"),
    )  # as wide as a terminal
    time.sleep(6)  # its start (imports, the first table) under a loaded CI: rich draws a pipe only at the end
    watch.send_signal(signal.SIGINT)
    out, err = watch.communicate(timeout=30)
    assert watch.returncode == 0, err
    assert "totals" in out and "ranked" in out and "Traceback" not in err
