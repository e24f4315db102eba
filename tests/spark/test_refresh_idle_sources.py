"""Source watermarks. Idle sources (`WITH ('idle_timeout' = ...)`): a source with no commit for that long stops
holding back the watermark of the views that read it; its next commit holds it back again, and the watermark
never moves back. A source's watermark is found once per table version, and a table made anew is read anew."""

from __future__ import annotations

import datetime as dt
import shutil
import time
from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

from mvengine.config import load_config
from mvengine.project.catalog import load_catalog
from mvengine.reading.describe import describe
from mvengine.reading.explain import plan_document
from mvengine.reading.versions import Versions
from mvengine.runtime.event_time import source_watermark
from mvengine.runtime.refresh import Refresher
from mvengine.storage.tables import TableRef

IDLE_SECONDS = 2
SOURCES = f"""
CREATE TABLE clicks (ad STRING, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH ('append_only' = 'true');
CREATE TABLE impressions (ad STRING, ts TIMESTAMP, WATERMARK FOR ts AS ts)
WITH ('append_only' = 'true', 'idle_timeout' = '{IDLE_SECONDS} seconds');
CREATE MATERIALIZED VIEW events AS
SELECT ad, ts FROM clicks UNION ALL SELECT ad, ts FROM impressions;
"""
NOON = dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.UTC)


def _add(catalog, source: str, minutes: list[int]) -> None:
    write_deltalake(
        TableRef(catalog.sources[source].path).uri,
        pa.table(
            {
                "ad": pa.array(["a"] * len(minutes), pa.string()),
                "ts": pa.array(
                    [NOON + dt.timedelta(minutes=m) for m in minutes], pa.timestamp("us", tz="UTC")
                ),
            }
        ),
        mode="append",
    )


def test_a_quiet_source_stops_holding_back_the_watermark_until_it_commits_again(spark, tmp_path: Path):
    (tmp_path / "views").mkdir()
    (tmp_path / "views" / "events.sql").write_text(SOURCES)
    config = load_config(tmp_path)
    catalog = load_catalog(config)
    (view,) = plan_document(catalog, ["events"])["views"]
    assert view["watermarks"] == ["clicks: ts AS ts", f"impressions: ts AS ts (idle after {IDLE_SECONDS} s)"]
    refresher = Refresher(spark, config, catalog)
    refresher.refresh()

    def watermark() -> str:
        return describe(Versions(config, catalog), "events")["watermark"]

    _add(catalog, "clicks", [5])
    _add(catalog, "impressions", [1])
    refresher.refresh()
    assert watermark() == "2026-11-23 12:01:00"  # impressions committed just now: it holds the view back

    time.sleep(IDLE_SECONDS + 0.5)
    _add(catalog, "clicks", [6])
    refresher.refresh()
    assert watermark() == "2026-11-23 12:06:00"  # impressions idle: clicks alone

    _add(catalog, "impressions", [3])
    refresher.refresh()
    assert (
        watermark() == "2026-11-23 12:06:00"
    )  # impressions counts again (12:03), but a watermark never goes back

    _add(catalog, "impressions", [9])
    _add(catalog, "clicks", [7])
    refresher.refresh()
    assert watermark() == "2026-11-23 12:07:00"  # both active: the least of them


def test_a_source_table_made_anew_at_its_path_has_its_watermark_read_anew(tmp_path: Path):
    """Its versions start again from 0: the watermark found for the old table's version 0 must not serve."""
    (tmp_path / "views").mkdir()
    (tmp_path / "views" / "events.sql").write_text(SOURCES)
    catalog = load_catalog(load_config(tmp_path))
    source = catalog.sources["clicks"]
    ref = TableRef(source.path)
    _add(catalog, "clicks", [5])
    assert source_watermark(source, ref, 0) == _micros(NOON + dt.timedelta(minutes=5))
    shutil.rmtree(ref.uri.removeprefix("file://"))
    _add(catalog, "clicks", [2])
    assert source_watermark(source, ref, 0) == _micros(NOON + dt.timedelta(minutes=2))


def _micros(t: dt.datetime) -> int:
    return int(t.timestamp()) * 1_000_000


def test_a_watermark_is_the_exact_largest_time_when_file_statistics_round_it(tmp_path: Path):
    """File statistics keep milliseconds: of two files whose largest times share one, the watermark is the larger
    time to the microsecond, whichever file holds it and whatever files hold earlier times."""
    (tmp_path / "views").mkdir()
    (tmp_path / "views" / "events.sql").write_text(SOURCES)
    catalog = load_catalog(load_config(tmp_path))
    source = catalog.sources["clicks"]
    ref = TableRef(source.path)
    latest = NOON + dt.timedelta(microseconds=1_999)
    for times in ([latest], [NOON + dt.timedelta(microseconds=1_500)], [NOON - dt.timedelta(minutes=1)]):
        write_deltalake(
            ref.uri,
            pa.table({"ad": ["a"], "ts": pa.array(times, pa.timestamp("us", tz="UTC"))}),
            mode="append",
        )
    assert source_watermark(source, ref, 2) == _micros(NOON) + 1_999
