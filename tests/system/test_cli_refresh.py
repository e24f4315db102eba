"""`mv refresh` as a user runs it (real processes): the batch lines, an up-to-date second run, a batch's phases
(`--profile`), a rebuild when the SQL changes, and `--continuous` stopping cleanly on SIGTERM."""

from __future__ import annotations

import re
import signal
import subprocess
import urllib.request
from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

from mvengine.config import load_config
from mvengine.project.catalog import load_catalog
from tests.conftest import NO_REGISTRATION
from tests.system.test_cli import BIN, run

SOURCES = "CREATE TABLE scores (name STRING NOT NULL, team STRING, score INT);\n"
VIEW = "CREATE MATERIALIZED VIEW totals AS SELECT team, SUM(score) AS total FROM scores GROUP BY team;\n"


def project(root: Path) -> Path:
    (root / "views").mkdir(parents=True)
    (root / "views" / "sources.sql").write_text(SOURCES)
    (root / "views" / "totals.sql").write_text(VIEW)
    return root


def test_refresh_builds_then_reports_up_to_date_then_rebuilds_on_sql_change(tmp_path):
    root = project(tmp_path)
    planned = run("--project", str(root), "refresh", "--dry-run")
    assert planned.returncode == 0, planned.stderr
    assert planned.stdout.splitlines() == [
        "totals: rebuild, batch 0 [bootstrap] inputs scores@0 (new view)",
        "nothing was written (--dry-run)",
    ]
    assert not (root / "warehouse").exists()  # not even the source table
    conf = root / "conf" / "mvengine.toml"
    conf.parent.mkdir()
    conf.write_text("[refresh]\ndriver_max_changes = 0\n")  # this bootstrap in Spark (a small one needs none)
    first = run("--project", str(root), "refresh")
    assert first.returncode == 0, first.stderr
    spark_line, line = first.stdout.splitlines()[:2]
    assert re.fullmatch(r"Spark started in \d+\.\d s", spark_line)  # on its own line, not in a batch's time
    assert line.startswith("totals: batch 0 [bootstrap] inputs scores@0: recomputed, 0 changelog rows out")
    assert "(new view)" in first.stdout
    assert (
        "default log4j profile" not in first.stderr and "Setting default log level" not in first.stderr
    )  # quiet
    assert "incubator" not in first.stderr + first.stdout  # the JVM's start-up warning is filtered out
    conf.unlink()
    again = run("--project", str(root), "refresh")
    # Nothing moved: answered from the Delta logs, without starting Spark (no "Spark started" line).
    assert again.returncode == 0 and again.stdout.strip() == "every view is up to date"
    scores = load_catalog(load_config(root)).sources["scores"].path
    schema = pa.schema([pa.field("name", pa.string(), False), ("team", pa.string()), ("score", pa.int32())])
    write_deltalake(scores, pa.table({"name": ["ann"], "team": ["red"], "score": [3]}, schema), mode="append")
    planned = run("--project", str(root), "refresh", "--dry-run")
    assert (
        planned.stdout.splitlines()[0]
        == "totals: apply, batch 1 [stream] inputs scores@0→1 (its inputs moved)"
    )
    profiled = run("--project", str(root), "refresh", "--profile")
    assert profiled.returncode == 0, profiled.stderr
    # A one-shot refresh runs its one batch without a streaming query (only --continuous starts one), and a
    # batch computed on the driver needs no Spark at all: Spark is not even started.
    line, phases = profiled.stdout.splitlines()[:2]
    assert "pipeline query" not in profiled.stdout and "Spark started" not in profiled.stdout
    assert line.startswith("totals: batch 1 [stream] inputs scores@1: 1 changes in, 1 changelog rows out")
    # One row's change is read by delta-rs and computed on the driver, and every write comes from there: no
    # Spark job in the whole batch.
    assert line.endswith(" ms on the driver"), line
    assert re.fullmatch(
        r"  phases: read changes \d+ ms \(0 jobs\), delta rule \d+ ms \(0 jobs\), "
        r"compute changes \d+ ms \(0 jobs\), commit state \d+ ms \(0 jobs\), commit snapshot "
        r"\d+ ms \(0 jobs\), commit key revisions \d+ ms \(0 jobs\), commit changelog \d+ ms "
        r"\(0 jobs\)",
        phases,
    ), phases
    (root / "views" / "totals.sql").write_text(
        VIEW.replace("SUM(score) AS total", "SUM(score) AS total, COUNT(*) AS n")
    )
    planned = run("--project", str(root), "refresh", "--dry-run", "totals")
    assert planned.stdout.splitlines()[0] == (
        "totals: rebuild, batch 2 [bootstrap] inputs scores@1 (SQL changed: rebuilt from the inputs; its columns "
        "changed: its snapshot and changelog take them in a new version)"
    )
    changed = run("--project", str(root), "refresh", "totals")
    assert changed.returncode == 0, changed.stderr
    assert (
        "SQL changed: rebuilt from the inputs; its columns changed: its snapshot and changelog take them in a "
        "new version" in changed.stdout
    )


def test_refresh_mistakes_are_one_line(tmp_path):
    root = project(tmp_path)
    result = run("--project", str(root), "refresh", "--interval", "1s")
    assert result.returncode == 1 and "--interval only applies with --continuous" in result.stderr
    result = run("--project", str(root), "refresh", "--dry-run", "--continuous")
    assert result.returncode == 1 and "--dry-run says what one refresh would do" in result.stderr
    result = run("--project", str(root), "refresh", "total")
    assert result.returncode == 1 and "no source or view named 'total'" in result.stderr
    assert "did you mean totals?" in result.stderr


def test_continuous_refresh_serves_its_spark_to_queries_and_stops_cleanly_on_sigterm(tmp_path):
    root = project(tmp_path)
    (root / "conf").mkdir()
    (root / "conf" / "mvengine.toml").write_text(NO_REGISTRATION)
    endpoint = root / "warehouse" / "_pipeline" / "connect.json"
    child = subprocess.Popen(
        [
            str(BIN / "mv"),
            "--project",
            str(root),
            "refresh",
            "--continuous",
            "--interval",
            "300ms",
            "--metrics-port",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline().startswith("Spark started in "), child.stderr.read()
        serving = child.stdout.readline()
        assert serving.startswith("serving this Spark to mv query and mv changes at sc://localhost:"), serving
        metrics = child.stdout.readline()
        assert metrics.startswith("serving Prometheus metrics at http://127.0.0.1:"), metrics
        line = child.stdout.readline()  # the first batch line: the loop is running
        assert line.startswith("totals: batch 0 [bootstrap]"), line + child.stderr.read()
        # A scrape: the warehouse's metrics (from the logs) and this process's own (from its batches).
        with urllib.request.urlopen(metrics.split(" at ")[1].strip(), timeout=30) as response:
            scraped = response.read().decode()
        assert 'mvengine_view_batches_total{view="totals"} 1.0' in scraped, scraped
        assert 'mvengine_view_lag_seconds{view="totals"} 0.0' in scraped, scraped
        assert re.search(
            r'mvengine_batches_total\{engine="\w+",kind="bootstrap",view="totals"\} 1.0', scraped
        )
        assert 'mvengine_batch_seconds_count{view="totals"} 1.0' in scraped, scraped
        assert endpoint.stat().st_mode & 0o777 == 0o600  # (its token: the warehouse owner's only)
        # A query while it runs takes its Spark (Spark Connect on loopback): it starts none of its own.
        queried = run("--project", str(root), "query", "SELECT COUNT(*) AS n FROM totals")
        assert queried.returncode == 0, queried.stderr
        assert queried.stdout.splitlines() == [
            "n",
            "0",
            f"(1 row)  read totals@v0; by the Spark of mv process {child.pid}",
        ], queried.stdout
        child.send_signal(signal.SIGTERM)
        out, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0, err
    assert "stopping after the current batch" in out
    assert not endpoint.exists()  # the next query starts its own Spark
