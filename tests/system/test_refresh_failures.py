"""Failures a user can recover from (issue 18): one refresh at a time per warehouse (runtime/lock.py), and a
batch that fails on its input data before writing anything is planned anew on the next refresh, so a fix in the
source is picked up; the error names the source, its key and the version, and `--full` as the last resort."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from mvengine.config import load_config
from mvengine.errors import MvError
from mvengine.project.catalog import load_catalog
from mvengine.runtime.refresh import Refresher, view_tables
from tests.conftest import NO_REGISTRATION
from tests.spark import test_refresh_differential as differential
from tests.system.test_cli import BIN, run

# -- one refresh at a time -----------------------------------------------------------------------------------

# The lock-wait test needs a view the refresh that waits recomputes (v_proj) and one it leaves as the holder left
# it; the racing refreshes below run the whole differential corpus.
LOCKED_VIEWS = """
CREATE MATERIALIZED VIEW v_proj AS SELECT k, g, v * 2 AS v2 FROM t WHERE v > 0 OR v IS NULL;
CREATE MATERIALIZED VIEW v_groups AS SELECT g, COUNT(*) AS n, SUM(v) AS s FROM t GROUP BY g;
"""


def _continuous(root: Path) -> subprocess.Popen:
    """`mv refresh --continuous` in a child, returned once it holds the lock (its first line after Spark's). Its
    next batch is an hour away: it holds the lock and idles."""
    child = subprocess.Popen(
        [str(BIN / "mv"), "--project", str(root), "refresh", "--continuous", "--interval", "1h"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    first = child.stdout.readline()
    assert first.startswith("Spark started in "), first + child.stderr.read()
    child.stdout.readline()  # a batch line, or "every view is up to date" never comes: the pipeline query's line
    return child


def _stop(child: subprocess.Popen) -> tuple[str, str]:
    child.send_signal(signal.SIGTERM)
    try:
        return child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)


def test_a_second_refresh_says_who_holds_the_views_and_wait_waits(spark, tmp_path):
    root = differential.make_project(tmp_path, LOCKED_VIEWS)
    config = load_config(root)
    catalog = load_catalog(config)
    Refresher(spark, config, catalog).refresh()
    holder = _continuous(root)
    try:
        differential.apply_commit(spark, catalog, ("insert_b", [("a", 1)]))
        # --full: it goes to the lock even when the holder has already taken the insert (nothing stale)
        second = run("--project", str(root), "refresh", "--full", "v_proj")
        assert second.returncode == 1, second.stdout + second.stderr
        assert f"are being refreshed by process {holder.pid} on " in second.stderr, second.stderr
        assert "mv refresh --wait" in second.stderr and "Traceback" not in second.stderr + second.stdout
        waiting = subprocess.Popen(
            # --full: it goes to the lock even when the holder has taken the insert and nothing is stale
            [str(BIN / "mv"), "--project", str(root), "refresh", "--wait", "--full", "v_proj"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        said = waiting.stdout.readline()  # blocks until it reached the lock: its first line
        assert said.startswith("waiting for the lock: views v_proj"), said + waiting.stderr.read()
        time.sleep(1)
        assert waiting.poll() is None, "mv refresh --wait did not wait for the lock"
    finally:
        out, err = _stop(holder)
    assert holder.returncode == 0, err
    out, err = waiting.communicate(timeout=120)
    assert waiting.returncode == 0, err
    assert "every view is up to date" not in out, out
    for name in catalog.plans:  # v_proj recomputed once the holder let go; the others as the holder left them
        differential.check_view(spark, catalog, name)


KILLED_HOLDING_THE_LOCK = """
import os, signal, sys
from mvengine.runtime.lock import refresh_lock
with refresh_lock(sys.argv[1], ["v"]):
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_lock_left_by_a_killed_process_is_taken_over(spark, tmp_path):
    root = differential.make_project(tmp_path, differential.VIEWS)
    config = load_config(root)
    catalog = load_catalog(config)
    folder = os.path.join(config.warehouse, "_pipeline")
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_HOLDING_THE_LOCK, folder], check=False, capture_output=True, text=True
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert '"pid"' in Path(folder, "lock").read_text()  # its owner record stays behind; the lock does not
    Refresher(spark, config, catalog).refresh()
    for name in catalog.plans:
        differential.check_view(spark, catalog, name)


# One round in the default run (three refresh processes racing a fourth); ten under crash_long (make test-long).
@pytest.mark.parametrize(
    "rounds", [1, pytest.param(10, marks=pytest.mark.crash_long)], ids=["1-round", "long"]
)
def test_refreshes_racing_a_continuous_one_leave_every_view_exact(spark, tmp_path, rounds):
    root = differential.make_project(tmp_path, differential.VIEWS)
    config = load_config(root)
    catalog = load_catalog(config)
    Refresher(spark, config, catalog).refresh()  # bootstrapped here: the children's batches are small
    mv = [str(BIN / "mv"), "--project", str(root), "refresh"]
    for i in range(rounds):
        children = [
            subprocess.Popen(
                mv + ["--continuous", "--interval", "200ms"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
        ]
        for extra in (["--wait"], []):
            time.sleep(0.5)
            differential.apply_commit(spark, catalog, ("upsert_t", [(i, "a", i), (i + 3, "b", -i)]))
            children.append(
                subprocess.Popen(mv + extra, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            )
        for step in range(6):
            differential.apply_commit(spark, catalog, ("insert_b", [("a", step), (None, i)]))
            differential.apply_commit(spark, catalog, ("delete_t", [step % 4]))
            time.sleep(1)
        _stop(children[0])
        for child in children:
            out, err = child.communicate(timeout=180)
            # Refused: exit 1, or the SIGTERM that stops the --continuous child reached it while it was exiting
            # after its refusal (or while Spark was starting: no handler for it yet).
            stopped = child is children[0] and child.returncode == -signal.SIGTERM
            refused = (child.returncode == 1 or stopped) and "are being refreshed by process" in err
            starting = stopped and "Spark started" not in out
            assert child.returncode == 0 or refused or starting, f"{child.args}: {out}{err}"
            assert "Traceback" not in out + err and "MicroBatchExecution" not in out + err, err
    Refresher(spark, config, catalog).refresh()
    for name in catalog.plans:
        differential.check_view(spark, catalog, name)


# -- a batch that fails on its data is planned anew ------------------------------------------------------------

ORDERS = """
CREATE TABLE customers (customer STRING NOT NULL, country STRING, PRIMARY KEY (customer) NOT ENFORCED);
CREATE TABLE orders (order_id INT NOT NULL, customer STRING, amount INT, PRIMARY KEY (order_id) NOT ENFORCED);
CREATE MATERIALIZED VIEW order_country AS
SELECT o.order_id, o.amount, c.country FROM orders o JOIN customers c ON o.customer = c.customer;
CREATE MATERIALIZED VIEW ratios AS SELECT order_id, CAST(100 / amount AS INT) AS per_unit FROM orders;
"""


def _orders_project(root: Path, driver_max_changes: int) -> Path:
    (root / "views").mkdir(parents=True)
    (root / "views" / "orders.sql").write_text(ORDERS)
    (root / "conf").mkdir()
    (root / "conf" / "mvengine.toml").write_text(
        f"[refresh]\ndriver_max_changes = {driver_max_changes}\n{NO_REGISTRATION}"
    )
    return root


def _append(path: str, rows: list[dict], schema: pa.Schema) -> None:
    write_deltalake(path, pa.Table.from_pylist(rows, schema=schema), mode="append")


CUSTOMERS = pa.schema([pa.field("customer", pa.string(), nullable=False), pa.field("country", pa.string())])
ORDER_ROWS = pa.schema(
    [
        pa.field("order_id", pa.int32(), nullable=False),
        pa.field("customer", pa.string()),
        pa.field("amount", pa.int32()),
    ]
)


@pytest.mark.parametrize("engine", ["driver", "spark"])
def test_a_duplicated_source_key_names_the_source_and_its_fix_is_picked_up(spark, tmp_path, engine):
    root = _orders_project(tmp_path, 1_000_000 if engine == "driver" else 0)
    config = load_config(root)
    catalog = load_catalog(config)
    Refresher(spark, config, catalog).refresh()
    customers, orders = (catalog.sources[n].path for n in ("customers", "orders"))
    _append(customers, [{"customer": "carol", "country": "DE"}], CUSTOMERS)
    _append(orders, [{"order_id": 1, "customer": "carol", "amount": 5}], ORDER_ROWS)
    Refresher(spark, config, catalog).refresh()
    _append(customers, [{"customer": "carol", "country": "FR"}], CUSTOMERS)  # a second row for key carol
    _append(orders, [{"order_id": 10, "customer": "carol", "amount": 7}], ORDER_ROWS)
    duplicated_at = DeltaTable(customers).version()
    for _ in range(2):  # the same error again: nothing was written
        with pytest.raises(MvError) as failed:
            Refresher(spark, config, catalog).refresh()
        message = str(failed.value)
        assert (
            f"source customers holds the key customers.customer='carol' 2 times at version {duplicated_at}"
            in message
        ), message
        assert "mv refresh --full order_country" in message and "views/orders.sql:2" in message
    DeltaTable(customers).delete("country = 'FR'")  # the fix the hint asks for, in a newer version
    notices: list[str] = []
    Refresher(spark, config, catalog, notice=notices.append).refresh()
    assert any("planned again, up to the inputs' newest versions" in n for n in notices), notices
    for name in catalog.plans:
        differential.check_view(spark, catalog, name)
    snapshot = DeltaTable(view_tables(catalog.plans["order_country"], {}).snapshot.uri).to_pyarrow_table()
    assert sorted(snapshot.to_pylist(), key=lambda r: r["order_id"]) == [
        {"order_id": 1, "amount": 5, "country": "DE"},
        {"order_id": 10, "amount": 7, "country": "DE"},
    ]


@pytest.mark.parametrize("engine", ["driver", "spark"])
def test_a_failing_expression_names_the_view_and_batch_and_a_fix_is_picked_up(spark, tmp_path, engine):
    root = _orders_project(tmp_path, 1_000_000 if engine == "driver" else 0)
    config = load_config(root)
    catalog = load_catalog(config)
    orders = catalog.sources["orders"].path
    Refresher(spark, config, catalog).refresh()
    _append(orders, [{"order_id": 1, "customer": "carol", "amount": 5}], ORDER_ROWS)
    Refresher(spark, config, catalog).refresh()
    _append(orders, [{"order_id": 2, "customer": "dan", "amount": 0}], ORDER_ROWS)  # 100 / 0 under ANSI
    with pytest.raises(MvError) as failed:
        Refresher(spark, config, catalog).refresh()
    message = str(failed.value)
    assert "views/orders.sql:6: view ratios: batch 2 (inputs orders@" in message, message
    assert "DIVIDE_BY_ZERO" in message and "mv refresh --full ratios" in message, message
    DeltaTable(orders).update(updates={"amount": "4"}, predicate="order_id = 2")
    Refresher(spark, config, catalog).refresh()
    for name in catalog.plans:
        differential.check_view(spark, catalog, name)
