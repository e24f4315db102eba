"""Nexmark's events, written once as Parquet files that both engines read: one file per stream and batch.

mvengine's generator (mvengine/nexmark.py, as `mv demo` writes a Nexmark project's sources) makes the events;
this writes batch N's events of each stream to `<folder>/<stream>/batch-NNNNN.parquet`, and a manifest
(`events.json`) saying how they were made and how many rows each batch holds. mvengine's saturation run
appends batch N's files to its Delta sources before its Nth refresh; Flink's filesystem connector reads the
folders whole. A folder made with the same seed, rate, batch size and event count is used as it is.

    .venv/bin/python benchmarks/peers/events.py /tmp/nexmark-events --events 10000000 --batch 100000
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from mvengine.config import load_config  # noqa: E402
from mvengine.nexmark import SOURCES, NexmarkFeed, side_input_rows  # noqa: E402
from mvengine.project.catalog import load_catalog  # noqa: E402

EXAMPLE = ROOT / "examples" / "nexmark"
SEED = 7
# The events' first timestamp: fixed, so that the same settings make the same files (a feed's clock otherwise).
STARTED = datetime(2026, 1, 1, tzinfo=UTC)


def batch_file(folder: Path, stream: str, number: int) -> Path:
    return folder / stream / f"batch-{number:05d}.parquet"


def without_zone(table: pa.Table) -> pa.Table:
    """The same instants as timestamps without a time zone (UTC's wall clock): Flink's Parquet reader takes
    TIMESTAMP(3) from them; mvengine's sources take them back with the zone (`with_zone`)."""
    fields = [
        pa.field(f.name, pa.timestamp("us")) if pa.types.is_timestamp(f.type) else f for f in table.schema
    ]
    return table.cast(pa.schema(fields))


def with_zone(table: pa.Table, schema: pa.Schema) -> pa.Table:
    return table.cast(schema)


def write_events(folder: Path, *, events: int, batch: int, rate: int) -> dict:
    """Write the events unless `folder` already holds these; returns the manifest."""
    wanted = {"seed": SEED, "rate": rate, "batch": batch, "events": events, "started": STARTED.isoformat()}
    manifest_path = folder / "events.json"
    if manifest_path.exists():
        manifest = json.loads(manifest_path.read_text())
        if {k: manifest.get(k) for k in wanted} == wanted:
            return manifest
    shutil.rmtree(folder, ignore_errors=True)
    for stream in SOURCES:
        (folder / stream).mkdir(parents=True)
    config = load_config(EXAMPLE)
    feed = NexmarkFeed(config, load_catalog(config), seed=SEED, interval=batch / rate, rate=rate)
    feed.started = STARTED
    counts = []
    for number in range(1, -(-events // batch) + 1):
        feed.interval = min(batch, events - feed.events) / rate
        tables = feed.next_tables()
        for stream, table in tables.items():
            pq.write_table(without_zone(table), batch_file(folder, stream, number))
        counts.append({stream: table.num_rows for stream, table in tables.items()})
        print(f"events: batch {number}, {feed.events:,} events", file=sys.stderr, flush=True)
    (folder / "side_input").mkdir()
    pq.write_table(pa.Table.from_pylist(side_input_rows()), folder / "side_input" / "side_input.parquet")
    manifest = {**wanted, "batches": counts}
    manifest_path.write_text(json.dumps(manifest, indent=1))
    return manifest


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("folder", type=Path)
    parser.add_argument("--events", type=int, default=10_000_000, help="events in all")
    parser.add_argument("--batch", type=int, default=100_000, help="events per batch (per file of a stream)")
    parser.add_argument("--rate", type=int, default=100_000, help="events per second of event time")
    args = parser.parse_args()
    manifest = write_events(args.folder, events=args.events, batch=args.batch, rate=args.rate)
    print(f"{args.folder}: {len(manifest['batches'])} batches, {manifest['events']:,} events")


if __name__ == "__main__":
    main()
