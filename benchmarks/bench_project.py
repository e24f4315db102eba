"""A throwaway mvengine project for a benchmark: one views file in a temporary folder, its sources created,
and a Refresher whose batch reports are collected."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from mvengine.config import load_config
from mvengine.project.catalog import Catalog, load_catalog
from mvengine.runtime.refresh import BatchReport, Refresher


def bench_refresher(spark, sql: str, conf: str | None = None) -> tuple[Catalog, Refresher, list[BatchReport]]:
    """`sql` becomes views/bench.sql and `conf`, when given, conf/mvengine.toml."""
    root = Path(tempfile.mkdtemp(prefix="mvbench"))
    (root / "views").mkdir()
    (root / "views" / "bench.sql").write_text(sql)
    if conf is not None:
        (root / "conf").mkdir()
        (root / "conf" / "mvengine.toml").write_text(conf)
    config = load_config(root)
    catalog = load_catalog(config)
    batches: list[BatchReport] = []
    refresher = Refresher(spark, config, catalog, report=batches.append)
    refresher.prepare_sources()
    return catalog, refresher, batches


def timed(work) -> float:
    """Seconds `work()` took."""
    started = time.monotonic()
    work()
    return time.monotonic() - started
