"""What a refresh costs beyond its batch's work: a Nexmark view refreshed in a loop, with its inputs still (an
idle refresh: lock, cut, the steps decided, every view skipped) and after a small batch of events.

For each query named, in a project of its own (as benchmarks/nexmark.py makes it): 10 s of events, the view
built, then --rounds times an idle `refresh()` and a `refresh()` after --events events. Prints the medians.

    .venv/bin/python benchmarks/refresh_overhead.py q4 q10 q20 --rounds 40
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import nexmark as nexmark_benchmark  # noqa: E402

from mvengine.config import load_config  # noqa: E402
from mvengine.nexmark import NexmarkFeed  # noqa: E402
from mvengine.project.catalog import load_catalog  # noqa: E402
from mvengine.runtime.refresh import Refresher  # noqa: E402
from mvengine.runtime.session import spark_session  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("queries", nargs="+", help="Nexmark queries, e.g. q4 q10")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--events", type=int, default=500, help="events per small batch (at 1,000 a second)")
    args = parser.parse_args()
    spark = spark_session(master="local[2]", conf={"spark.sql.shuffle.partitions": "2"})
    files = nexmark_benchmark.query_files()
    for name in args.queries:
        root = nexmark_benchmark.project(Path(tempfile.mkdtemp(prefix=f"overhead-{name}-")), files[name])
        config = load_config(root)
        catalog = load_catalog(config)
        feed = NexmarkFeed(config, catalog, seed=7, interval=10, rate=1000)
        feed.start()
        feed.next_batch()
        feed.interval = args.events / 1000
        refresher = Refresher(spark, config, catalog)
        refresher.refresh()
        idle, small = [], []
        for _ in range(args.rounds):
            started = time.perf_counter()
            refresher.refresh()
            idle.append(time.perf_counter() - started)
            feed.next_batch()
            started = time.perf_counter()
            refresher.refresh()
            small.append(time.perf_counter() - started)
        print(
            f"{name}: idle refresh median {statistics.median(idle) * 1000:.1f} ms, "
            f"{args.events}-event batch median {statistics.median(small) * 1000:.1f} ms",
            flush=True,
        )
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
