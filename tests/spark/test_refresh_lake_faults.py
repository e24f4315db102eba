"""Faults of the lake (issue 18), each with real Delta tables: every one ends in the right result, or in a
located error and no partial write. (A source OPTIMIZEd and VACUUMed under a refresh: test_refresh_interop.)"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from mvengine.config import load_config
from mvengine.errors import MvError
from mvengine.project.catalog import load_catalog
from mvengine.project.drift import source_drifts
from mvengine.reading.explain import plan_document
from mvengine.reading.status import status
from mvengine.reading.versions import Versions
from mvengine.runtime.refresh import Refresher, view_tables
from mvengine.runtime.refresh_plan import planned_steps
from tests.spark import test_refresh_differential as differential
from tests.system.test_refresh_failures import CUSTOMERS, ORDER_ROWS, _append, _orders_project


def _setup(spark, root: Path, engine: str = "driver"):
    """The orders project, refreshed over a first commit to each source."""
    root = _orders_project(root, 1_000_000 if engine == "driver" else 0)
    config = load_config(root)
    catalog = load_catalog(config)
    customers, orders = (catalog.sources[n].path for n in ("customers", "orders"))
    Refresher(spark, config, catalog).prepare_sources()
    _append(
        customers, [{"customer": "carol", "country": "DE"}, {"customer": "dan", "country": "FR"}], CUSTOMERS
    )
    _append(orders, [{"order_id": 1, "customer": "carol", "amount": 5}], ORDER_ROWS)
    Refresher(spark, config, catalog).refresh()
    return config, catalog, customers, orders


def _versions(catalog) -> dict[str, int]:
    return {n: view_tables(p, {}).snapshot.open().version() for n, p in catalog.plans.items()}


def _fails_writing_nothing(spark, config, catalog, match: str | None = None) -> MvError:
    """Refresh, which must raise an MvError (matching `match`) and leave every view at its version."""
    before = _versions(catalog)
    with pytest.raises(MvError, match=match) as failed:
        Refresher(spark, config, catalog).refresh()
    assert _versions(catalog) == before, "the failed refresh moved a view"
    return failed.value


def _check(spark, catalog) -> None:
    for name in catalog.plans:
        differential.check_view(spark, catalog, name)


@pytest.mark.parametrize("engine", ["driver", "spark"])
def test_a_join_side_whose_version_vacuum_removed_names_the_version_and_retention(spark, tmp_path, engine):
    config, catalog, customers, orders = _setup(spark, tmp_path, engine)
    read_at = DeltaTable(customers).version()
    DeltaTable(customers).delete("customer = 'dan'")  # rewrites the file the view's last version reads
    _append(orders, [{"order_id": 2, "customer": "carol", "amount": 3}], ORDER_ROWS)
    DeltaTable(customers).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    message = str(_fails_writing_nothing(spark, config, catalog))
    assert f"it reads source customers as of version {read_at}" in message, message
    assert "delta.deletedFileRetentionDuration (interval 1 week, the default)" in message
    assert "mv refresh --full order_country" in message
    Refresher(spark, config, catalog).refresh(["order_country"], full=True)  # the recovery the hint names
    Refresher(spark, config, catalog).refresh()
    _check(spark, catalog)


@pytest.mark.parametrize("engine", ["driver", "spark"])
def test_a_column_another_writer_added_to_a_source_is_ignored_and_the_refresh_goes_on(
    spark, tmp_path, engine
):
    config, catalog, customers, orders = _setup(spark, tmp_path, engine)
    (tmp_path / "views" / "star.sql").write_text(
        "CREATE MATERIALIZED VIEW big_orders AS SELECT * FROM orders WHERE amount > 2;\n"
    )
    catalog = load_catalog(config)
    Refresher(spark, config, catalog).refresh()
    # Another writer adds a column, by Spark's ALTER TABLE and by a delta-rs write that merges its schema.
    spark.sql(f"ALTER TABLE delta.`{customers}` ADD COLUMNS (tier STRING)")
    spark.sql(f"INSERT INTO delta.`{customers}` VALUES ('erin', 'NL', 'gold')")
    rows = pa.table(
        {
            "order_id": pa.array([3, 4], pa.int32()),
            "customer": ["dan", "erin"],
            "amount": pa.array([1, 4], pa.int32()),
            "note": ["new", None],
        }
    )
    write_deltalake(orders, rows, mode="append", schema_mode="merge")
    DeltaTable(orders).delete("order_id = 1")
    steps = [s.line() for s in planned_steps(config, catalog, list(catalog.plans.values()))]
    assert any(s.startswith("order_country: apply") for s in steps), steps
    Refresher(spark, config, catalog).refresh()
    _check(spark, catalog)
    ignored = {s.name: s.ignored_columns for s in status(Versions(config, catalog)) if s.kind == "source"}
    assert ignored == {"customers": ["tier"], "orders": ["note"]}
    drifts = source_drifts(catalog, catalog.sources, {})
    planned = {s["name"]: s["ignored_columns"] for s in plan_document(catalog, [], drifts)["sources"]}
    assert planned == ignored
    # SELECT * keeps the declared columns (declaring the new one rebuilds the views over the source).
    big_orders = view_tables(catalog.plans["big_orders"], {}).snapshot.open()
    assert big_orders.schema().to_arrow().names == ["order_id", "customer", "amount"]
    assert sorted(r["order_id"] for r in big_orders.to_pyarrow_table().to_pylist()) == [4]


@pytest.mark.parametrize("change", ["dropped", "retyped"])
def test_a_declared_column_another_writer_dropped_stops_the_views_over_it_and_only_those(
    spark, tmp_path, change
):
    config, catalog, customers, orders = _setup(spark, tmp_path)
    if change == "dropped":
        rows = pa.table({"customer": ["erin"]})
        expected = "declared column country is missing"
    else:
        rows = pa.table({"customer": ["erin"], "country": pa.array([7], pa.int64())})
        expected = "column country is int64, declared string"
    write_deltalake(customers, rows, mode="overwrite", schema_mode="overwrite")
    _append(orders, [{"order_id": 2, "customer": "carol", "amount": 4}], ORDER_ROWS)
    ratios = view_tables(catalog.plans["ratios"], {}).snapshot
    before = ratios.open().version()
    steps = [s.line() for s in planned_steps(config, catalog, list(catalog.plans.values()))]
    assert any(
        s.startswith("order_country: blocked (view order_country reads source customers") for s in steps
    )
    with pytest.raises(MvError) as failed:
        Refresher(spark, config, catalog).refresh()
    message = str(failed.value)
    assert message.startswith("views/orders.sql:4: view order_country reads source customers "), message
    assert expected in message and "nothing was written for order_country" in message, message
    assert "make the CREATE TABLE match the table" in failed.value.hint
    assert ratios.open().version() == before + 1  # the view over orders alone went on
    (customers_status,) = [s for s in status(Versions(config, catalog)) if s.name == "customers"]
    assert customers_status.problem == f"{expected}: the views over it stop"
    differential.check_view(spark, catalog, "ratios")


def test_a_source_deleted_and_created_again_is_detected_not_diffed(spark, tmp_path):
    config, catalog, _, orders = _setup(spark, tmp_path)
    for i in range(3):  # the new table gets past the version the views reflect
        _append(orders, [{"order_id": 10 + i, "customer": "dan", "amount": 2}], ORDER_ROWS)
    Refresher(spark, config, catalog).refresh()
    shutil.rmtree(orders)
    for i in range(5):
        write_deltalake(
            orders,
            pa.Table.from_pylist(
                [{"order_id": 100 + i, "customer": "carol", "amount": 1}], schema=ORDER_ROWS
            ),
            mode="append",
            configuration={"delta.enableChangeDataFeed": "true"} if i == 0 else None,
        )
    failed = _fails_writing_nothing(
        spark,
        config,
        catalog,
        r"source orders \(.*\) was deleted and created again "
        r"since view order_country last read it at version 4",
    )
    assert "mv refresh --full order_country" in failed.hint
    Refresher(spark, config, catalog).refresh(full=True)
    _check(spark, catalog)


@pytest.mark.parametrize("damage", ["truncated commit", "garbage checkpoint"])
def test_a_damaged_delta_log_is_a_located_error_and_nothing_is_written(spark, tmp_path, damage):
    config, catalog, _, orders = _setup(spark, tmp_path)
    _append(orders, [{"order_id": 2, "customer": "carol", "amount": 3}], ORDER_ROWS)
    if damage == "garbage checkpoint":
        DeltaTable(orders).create_checkpoint()
        next(Path(orders, "_delta_log").glob("*.checkpoint.parquet")).write_bytes(b"not parquet at all")
    else:
        damaged = Path(orders, "_delta_log", f"{DeltaTable(orders).version():020d}.json")
        damaged.write_text(damaged.read_text()[:40])
    before = _versions(catalog)
    result = subprocess.run(
        [str(Path(os.sys.executable).parent / "mv"), "--project", str(config.project_dir), "refresh"],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "table 'orders'" in errors[0] and "Traceback" not in result.stderr, (
        result.stderr
    )
    assert "<unknown>" not in result.stderr, result.stderr  # no Rust backtrace either
    assert "internal error" not in errors[0], errors[0]
    assert _versions(catalog) == before


def test_a_view_folder_removed_by_hand_is_rebuilt(spark, tmp_path):
    config, catalog, _, orders = _setup(spark, tmp_path)
    folder = Path(view_tables(catalog.plans["order_country"], {}).snapshot.uri.removeprefix("file://")).parent
    shutil.rmtree(folder)
    _append(orders, [{"order_id": 2, "customer": "dan", "amount": 3}], ORDER_ROWS)
    reports = []
    Refresher(spark, config, catalog, report=reports.append).refresh()
    assert any(r.view == "order_country" and r.note == "new view" for r in reports), reports
    _check(spark, catalog)


def _mount_small_disk(path: Path, size: str) -> bool:
    path.mkdir(parents=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        check=False,
        capture_output=True,
        text=True,
    )
    return mounted.returncode == 0


def test_a_full_disk_during_a_commit_is_an_error_and_the_next_refresh_finishes(spark, tmp_path):
    disk = tmp_path / "disk"
    if not _mount_small_disk(disk, "24m"):
        pytest.skip("mounting a small tmpfs needs root (CAP_SYS_ADMIN): not available here")
    try:
        root = _orders_project(disk / "project", 1_000_000)
        config = load_config(root)
        catalog = load_catalog(config)
        customers, orders = (catalog.sources[n].path for n in ("customers", "orders"))
        Refresher(spark, config, catalog).prepare_sources()
        _append(customers, [{"customer": "carol", "country": "DE"}], CUSTOMERS)
        Refresher(spark, config, catalog).refresh()
        rows = [{"order_id": i, "customer": "carol", "amount": i % 7 + 1} for i in range(200_000)]
        _append(orders, rows, ORDER_ROWS)
        free = shutil.disk_usage(disk).free
        filler = disk / "filler"
        filler.write_bytes(b"\0" * max(free - 1_500_000, 0))  # room for the log, not for the views' files
        failed = _fails_writing_nothing(
            spark,
            config,
            catalog,
            r"view order_country: batch 1 \(inputs .*\): the "
            r"disk is full: .*No space left on device",
        )
        assert "free space where the warehouse is" in failed.hint
        filler.unlink()
        Refresher(spark, config, catalog).refresh()
        _check(spark, catalog)
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False, capture_output=True)
