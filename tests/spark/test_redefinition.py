"""A view whose definition changes keeps its history (issue 40): its new result is a new version of the same
snapshot and changelog, with the new columns where they changed, and the changelog holds the difference."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from mvengine.config import load_config
from mvengine.project.catalog import load_catalog
from mvengine.reading.describe import history
from mvengine.reading.versions import Versions
from mvengine.runtime.refresh import Refresher, view_tables
from mvengine.runtime.refresh_plan import planned_steps
from tests.spark import test_refresh_differential as differential

SOURCE = """
CREATE TABLE scores (name STRING NOT NULL, team STRING, score INT, PRIMARY KEY (name) NOT ENFORCED);
"""
TOTALS = "CREATE MATERIALIZED VIEW totals AS SELECT team, SUM(score) AS total FROM scores GROUP BY team;\n"
BEST = "CREATE MATERIALIZED VIEW best AS SELECT * FROM totals WHERE total > 3;\n"
ROWS = pa.schema(
    [
        pa.field("name", pa.string(), nullable=False),
        pa.field("team", pa.string()),
        pa.field("score", pa.int32()),
    ]
)


def _project(root: Path, engine: str) -> Path:
    (root / "views").mkdir(parents=True)
    (root / "views" / "scores.sql").write_text(SOURCE)
    (root / "views" / "totals.sql").write_text(TOTALS + BEST)
    (root / "conf").mkdir()
    most = 1_000_000 if engine == "driver" else 0
    (root / "conf" / "mvengine.toml").write_text(f"[refresh]\ndriver_max_changes = {most}\n")
    return root


def _write(path: str, rows: list[tuple]) -> None:
    table = pa.Table.from_pylist([dict(zip(ROWS.names, r)) for r in rows], schema=ROWS)
    write_deltalake(path, table, mode="append")


def _refresh(spark, root: Path):
    config = load_config(root)
    catalog = load_catalog(config)
    Refresher(spark, config, catalog).refresh()
    return config, catalog


@pytest.mark.parametrize("engine", ["driver", "spark"])
def test_a_redefined_view_keeps_its_history_and_logs_the_difference(spark, tmp_path, engine):
    root = _project(tmp_path, engine)
    config, catalog = _refresh(spark, root)
    scores = catalog.sources["scores"].path
    _write(scores, [("ann", "red", 5), ("bob", "red", 2), ("cy", "blue", 1), ("dee", None, 4)])
    _refresh(spark, root)
    DeltaTable(scores).delete("name = 'cy'")
    config, catalog = _refresh(spark, root)
    totals = view_tables(catalog.plans["totals"], {})
    before = totals.snapshot.open().version()
    old_rows = DeltaTable(totals.snapshot.uri).to_pyarrow_table().sort_by("total").to_pylist()
    old_log = DeltaTable(totals.changelog.uri).to_pyarrow_table().num_rows

    # Same columns, another result: a rebuild whose changelog holds just the difference.
    (root / "views" / "totals.sql").write_text(TOTALS.replace("SUM(score)", "SUM(score) * 2") + BEST)
    config, catalog = _refresh(spark, root)
    assert totals.snapshot.open().version() == before + 1
    for name in catalog.plans:
        differential.check_view(spark, catalog, name)

    # Other columns (one added, one retyped): new versions of the same tables, the old ones still readable.
    redefined = TOTALS.replace("SUM(score) AS total", "CAST(SUM(score) AS STRING) AS total, COUNT(*) AS n")
    (root / "views" / "totals.sql").write_text(redefined + BEST)
    config, catalog = load_config(root), load_catalog(load_config(root))
    steps = {s.view: s.line() for s in planned_steps(config, catalog, list(catalog.plans.values()))}
    assert "its columns changed: its snapshot and changelog take them in a new version" in steps["totals"]
    Refresher(spark, config, catalog).refresh()
    snapshot = DeltaTable(totals.snapshot.uri)
    assert snapshot.version() == before + 2
    assert snapshot.schema().to_arrow().names == ["team", "total", "n"]
    assert DeltaTable(totals.snapshot.uri, version=before).to_pyarrow_table().sort_by(
        "total"
    ).to_pylist() == (old_rows)
    log = DeltaTable(totals.changelog.uri).to_pyarrow_table()
    assert log.num_rows > old_log  # (the earlier rows are all still there)
    latest = log.filter(pa.compute.equal(log.column("_version"), before + 2)).to_pylist()
    assert sorted(((r["_op"], r["team"], r["total"], r["n"]) for r in latest), key=str) == sorted(
        [("-D", t, str(v * 2), None) for t, v in [("red", 7), (None, 4)]]
        + [("+I", t, str(v), n) for t, v, n in [("red", 7, 2), (None, 4, 1)]],
        key=str,
    )
    for name in catalog.plans:  # (best, over totals, was rebuilt: its upstream's columns changed)
        differential.check_view(spark, catalog, name)
    marked = [e["version"] for e in history(Versions(config, catalog), "totals") if e["redefined"]]
    assert marked == [before + 1, before + 2]

    # And on from there, incrementally.
    _write(scores, [("eve", "blue", 9)])
    config, catalog = _refresh(spark, root)
    for name in catalog.plans:
        differential.check_view(spark, catalog, name)
