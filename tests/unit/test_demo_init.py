"""`mv init` (a new project that plans and whose settings are the defaults) and `mv demo` (the example sources'
live feed: reproducible with a seed, append-only where the source says so, users renamed as one commit)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from deltalake import DeltaTable

from mvengine.cli.main import main
from mvengine.config import _KNOWN, load_config, metastore_defaults
from mvengine.demo import DemoFeed, run_demo
from mvengine.errors import MvError
from mvengine.load import load
from mvengine.project.catalog import load_catalog
from mvengine.scaffold import CONFIG, init_project

ROOT = Path(__file__).resolve().parent.parent.parent


def _without_metastore(config) -> dict[str, str]:
    return {k: v for k, v in config.spark_conf.items() if k not in metastore_defaults(config.warehouse)}


def test_init_writes_a_project_that_plans_with_default_settings(tmp_path, capsys):
    folder = tmp_path / "shop"
    assert main(["init", str(folder)]) == 0
    out = capsys.readouterr().out
    assert (
        "created 5 files" in out and "mv refresh" in out and 'mv query "SELECT * FROM customer_totals"' in out
    )
    assert "mv load orders data/orders.csv" in out
    config = load_config(folder)
    defaults = load_config(tmp_path / "shop" / "views")  # a folder without conf/: every default
    assert (
        config.spark_master,
        config.spark_log_level,
        config.refresh_interval_s,
        config.storage_options,
        config.require_bounded_state,
        config.catalog_register,
        config.catalog_schema,
        _without_metastore(config),
    ) == (
        defaults.spark_master,
        defaults.spark_log_level,
        defaults.refresh_interval_s,
        defaults.storage_options,
        defaults.require_bounded_state,
        defaults.catalog_register,
        defaults.catalog_schema,
        _without_metastore(defaults),
    )
    # The metastore is the warehouse's own (each default names its folder).
    assert metastore_defaults(config.warehouse).items() <= config.spark_conf.items()
    assert (
        str(folder.resolve() / "warehouse" / "_catalog")
        in config.spark_conf["spark.hadoop.javax.jdo.option.ConnectionURL"]
    )
    assert config.warehouse == str(folder.resolve() / "warehouse")
    for section, keys in _KNOWN.items():  # every setting is written out (commented; a table as its header)
        for key in keys - {"conf", "options", "transport"}:
            assert f"# {key} = " in CONFIG, (section, key)
    assert "[lineage.transport]\n" in CONFIG
    catalog = load_catalog(config)
    assert catalog.plans["customer_totals"].strategy == "incremental"
    assert "/warehouse/" in (folder / ".gitignore").read_text()
    assert load(config, catalog, "orders", str(folder / "data" / "orders.csv")).appended == 3  # the next step


def test_init_writes_nothing_where_a_project_is(tmp_path, capsys):
    init_project(tmp_path / "p")
    (tmp_path / "p" / "views" / "sources.sql").write_text("-- mine\n")
    with pytest.raises(MvError, match="already holds conf/mvengine.toml, views, data, .gitignore"):
        init_project(tmp_path / "p")
    assert (tmp_path / "p" / "views" / "sources.sql").read_text() == "-- mine\n"
    assert main(["init", str(tmp_path / "p")]) == 1
    assert "wrote nothing" in capsys.readouterr().err


def example(tmp_path: Path, name: str) -> tuple:
    root = tmp_path / name
    shutil.copytree(ROOT / "views", root / "views")
    config = load_config(root)
    return config, load_catalog(config)


def table_rows(config, catalog, source: str) -> list[dict]:
    return DeltaTable(catalog.sources[source].path).to_pyarrow_table().to_pylist()


def test_demo_with_a_seed_writes_the_same_changes(tmp_path):
    written = []
    for name in ("a", "b"):
        config, catalog = example(tmp_path, name)
        feed = DemoFeed(config, catalog, seed=3)
        feed.start()
        for _ in range(30):
            feed.next_batch()
        feed_start = min(r["ts"] for r in table_rows(config, catalog, "user_scores"))
        scores = sorted(
            (r["name"], r["team"], r["score"], r["ts"] - feed_start)
            for r in table_rows(config, catalog, "user_scores")
        )
        users = sorted(tuple(r.values()) for r in table_rows(config, catalog, "users"))
        written.append((scores, users))
    assert written[0] == written[1]


def test_run_demo_writes_a_batch_per_interval_until_the_duration(tmp_path):
    config, catalog = example(tmp_path, "p")
    lines: list[str] = []
    batches = run_demo(config, catalog, interval=0.5, duration=1.2, seed=1, report=lines.append)
    assert (
        batches == 3 and lines[0] == "demo batch 0: 8 users joined" and lines[-1].startswith("demo batch 3: ")
    )


def test_demo_keeps_user_scores_append_only_and_users_keyed(tmp_path):
    config, catalog = example(tmp_path, "p")
    feed = DemoFeed(config, catalog, seed=11)
    lines = [feed.start().line()] + [feed.next_batch().line() for _ in range(120)]
    assert lines[0] == "demo batch 0: 8 users joined"
    assert any("renamed to" in line for line in lines) and any("taken back" in line for line in lines)
    assert any("late" in line for line in lines) and any(" moved from " in line for line in lines)
    operations = {h["operation"] for h in DeltaTable(catalog.sources["user_scores"].path).history()}
    assert operations == {"CREATE TABLE", "WRITE"}  # only appends
    scores = table_rows(config, catalog, "user_scores")
    positive = {(r["name"], r["team"], r["score"], r["ts"]) for r in scores if r["score"] > 0}
    for r in (r for r in scores if r["score"] < 0):  # a taken-back score negates one that was sent
        assert (r["name"], r["team"], -r["score"], r["ts"]) in positive
    users = table_rows(config, catalog, "users")
    assert len({u["name"] for u in users}) == len(users) == 8  # a rename replaced the key, in one commit
    assert {u["name"]: (u["team"], u["country"]) for u in users} == feed.roster


def test_demo_needs_the_example_sources(tmp_path, capsys):
    init_project(tmp_path / "shop")
    assert main(["--project", str(tmp_path / "shop"), "demo", "--duration", "1s"]) == 1
    assert "mv demo writes into the example project's sources" in capsys.readouterr().err
