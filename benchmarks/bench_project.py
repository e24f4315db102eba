"""A throwaway mvengine project for a benchmark: one views file in a temporary folder, its sources created,
and a Refresher whose batch reports are collected."""

from __future__ import annotations

import statistics
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from phases import median_phases  # benchmarks/phases.py

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


@dataclass
class SideBySide:
    """Rounds of an incremental refresh and, right after it, a full one (each view recomputed and diffed against
    its snapshot), in one process: the medians of both, the engines of the incremental batches, each view's
    milliseconds both ways (with its helper views, `<view>__scalar_1`, ...), and their phase profiles."""

    refresher: Refresher
    batches: list[BatchReport]
    views: list[str]
    incremental: list[float] = field(default_factory=list)
    full: list[float] = field(default_factory=list)
    rounds: list[list[BatchReport]] = field(default_factory=list)
    engines: Counter = field(default_factory=Counter)
    view_ms: dict[tuple[str, str], list[int]] = field(default_factory=lambda: defaultdict(list))

    def round(self) -> None:
        """Refresh incrementally, then in full, once the sources' changes of this round are committed."""
        self.batches.clear()
        self.incremental.append(timed(self.refresher.refresh))
        streamed = [b for b in self.batches if b.kind == "stream"]
        self.rounds.append(streamed)
        self.engines.update(b.engine for b in streamed)
        self.batches.clear()
        self.full.append(timed(lambda: self.refresher.refresh(full=True)))
        for how, reports in (("incremental", streamed), ("full", self.batches)):
            for view in self.views:
                self.view_ms[view, how].append(
                    sum(b.millis for b in reports if b.view == view or b.view.startswith(f"{view}__"))
                )

    def print(self, changed: int, profile: bool) -> None:
        """One line of medians for rounds of `changed` changes (then the views' lines, and the profile)."""
        inc, ful = statistics.median(self.incremental), statistics.median(self.full)
        print(
            f"{changed:>8} {inc:>14.2f} {ful:>7.1f} {ful / inc:>9.1f}x  "
            + ", ".join(f"{engine} {count}" for engine, count in sorted(self.engines.items())),
            flush=True,
        )
        for view in self.views:
            one, whole = (statistics.median(self.view_ms[view, how]) for how in ("incremental", "full"))
            print(
                f"    {view:24} incremental {one:>6.0f} ms, full {whole:>6.0f} ms: {whole / max(one, 1):>6.1f}x",
                flush=True,
            )
        if profile:
            print(median_phases(self.rounds), flush=True)
            for b in self.rounds[-1]:
                if b.engine != "driver":
                    print(f"    {b.line()}", flush=True)


def spark_changes(
    spark, path: str, changed: int, round_: int, rows: int, next_id: int, update_set: str, new_rows
) -> int:
    """One round's changes of about `changed` rows of the table at `path`, by Spark SQL (through deletion
    vectors when the table has them on): an UPDATE (`SET update_set`) of half of them, a DELETE of a quarter and
    a MERGE that inserts a quarter, the rows `new_rows(first, last)` selects (ids first to last - 1). The rows
    updated and deleted are a run of ids that moves with the round; returns the next new id."""
    first = (round_ * 7919 + changed * 31) % max(rows - changed, 1)
    updated, deleted = max(changed // 2, 1), changed // 4
    inserted = max(changed - updated - deleted, 0)
    spark.sql(f"UPDATE delta.`{path}` SET {update_set} WHERE id >= {first} AND id < {first + updated}")
    if deleted:
        spark.sql(
            f"DELETE FROM delta.`{path}` WHERE id >= {first + updated} AND id < {first + updated + deleted}"
        )
    if inserted:
        spark.sql(
            f"MERGE INTO delta.`{path}` AS o USING ({new_rows(next_id, next_id + inserted)}) AS s "
            "ON o.id = s.id WHEN NOT MATCHED THEN INSERT *"
        )
    return next_id + inserted
