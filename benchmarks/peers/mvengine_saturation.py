"""mvengine at saturation on one Nexmark query: every batch of events is waiting when its refresh starts.

The events are benchmarks/peers/events.py's files. Before refresh N, batch N's files (`--files-per-batch` of
them per stream: 100,000 events a file gives batches of 100k or 1M events) are appended to the project's Delta
sources in one commit each; refresh N is the pipeline batch `mv refresh --continuous` runs when it finds them.
Only the refreshes are timed: writing the sources stands in for the producer. Then, with `--full`, Spark
recomputes the view over all the events (`refresh(full=True)`, mvengine's own recomputation, in Spark), and
the incremental snapshot is compared with the recomputed one in Spark (no rows gathered on the driver).

Prints one JSON object: events, refresh seconds (each batch), events/s (all events over the refreshes' sum),
the phase medians of the batches (runtime/profile.py) and the slowest batch's phases, where each batch ran, the
driver's peak resident memory (Python and its Spark JVM), the recomputation's seconds and whether the two
snapshots are equal.

    .venv/bin/python benchmarks/peers/mvengine_saturation.py /tmp/nexmark-events q5 --files-per-batch 10 --full
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks" / "peers"))

from events import batch_file, with_zone  # noqa: E402  (benchmarks/peers/events.py)

from mvengine.config import load_config  # noqa: E402
from mvengine.nexmark import SOURCES, NexmarkFeed  # noqa: E402
from mvengine.project.catalog import load_catalog  # noqa: E402
from mvengine.project.layout import source_table  # noqa: E402
from mvengine.runtime.refresh import BatchReport, Refresher, view_tables  # noqa: E402
from mvengine.runtime.session import spark_session  # noqa: E402
from mvengine.storage.api import read_table  # noqa: E402

EXAMPLE = ROOT / "examples" / "nexmark" / "views"


def query_file(name: str) -> Path:
    """The example's file whose last view is `name` (q0 ... q22), or the file `name` (a .sql file of views over
    the example's sources, its last view measured)."""
    if name.endswith(".sql"):
        return Path(name)
    for path in sorted(EXAMPLE.glob("q*.sql")):
        if re.findall(r"CREATE MATERIALIZED VIEW (\w+)", path.read_text(), re.IGNORECASE)[-1] == name:
            return path
    raise SystemExit(f"no query {name} in {EXAMPLE}")


def project(root: Path, query: Path, name: str, lateness: str | None = None) -> Path:
    """The example's sources and the query's file; with `lateness`, its view `name` allows that lateness."""
    (root / "views").mkdir(parents=True)
    shutil.copy(EXAMPLE / "sources.sql", root / "views")
    text = query.read_text()
    if lateness is not None:
        text = re.sub(
            rf"CREATE MATERIALIZED VIEW {name} AS",
            f"CREATE MATERIALIZED VIEW {name} WITH ('allowed_lateness' = '{lateness}') AS",
            text,
            flags=re.IGNORECASE,
        )
    (root / "views" / query.name).write_text(text)
    (root / "conf").mkdir()
    (root / "conf" / "mvengine.toml").write_text(
        '[spark.conf]\n"spark.sql.shuffle.partitions" = "2"\n[catalog]\nregister = false\n'
    )
    return root


def peak_rss_mib() -> dict[str, float]:
    """Peak resident memory of this process (Python) and of each Java process under it (Spark's JVM)."""
    found = {"python": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    jvm = 0.0
    for pid in _descendants(os.getpid()):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        if re.search(r"^Name:\s+java$", status, re.MULTILINE):
            match = re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)
            jvm = max(jvm, int(match.group(1)) / 1024 if match else 0.0)
    found["jvm"] = jvm
    return found


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = defaultdict(list)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int(Path(entry, "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children[parent].append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children[todo.pop()]:
            found.append(child)
            todo.append(child)
    return found


def phase_medians(reports: list[list[BatchReport]]) -> dict[str, dict[str, float]]:
    """Per view and phase, the median milliseconds and Spark jobs over the batches."""
    millis, jobs = defaultdict(list), defaultdict(list)
    for batch in reports:
        for report in batch:
            for phase in report.phases:
                millis[f"{report.view} {phase.name}"].append(phase.millis)
                jobs[f"{report.view} {phase.name}"].append(phase.jobs)
    return {
        key: {"ms": statistics.median(values), "jobs": statistics.median(jobs[key])}
        for key, values in millis.items()
    }


def state_rows(state: str) -> dict[str, int]:
    """The rows of each of a view's state tables, from their logs (delta-rs's add actions)."""
    from deltalake import DeltaTable

    found = {}
    for table in sorted(Path(state).glob("*")) if Path(state).is_dir() else []:
        if (table / "_delta_log").is_dir():
            actions = pa.table(DeltaTable(str(table)).get_add_actions(flatten=True))
            found[table.name] = sum(actions.column("num_records").to_pylist()) if actions.num_rows else 0
    return found


def run(
    folder: Path,
    name: str,
    files_per_batch: int,
    full: bool,
    batches: int | None,
    lateness: str | None = None,
) -> dict:
    manifest = json.loads((folder / "events.json").read_text())
    query = query_file(name)
    name = re.findall(r"CREATE MATERIALIZED VIEW (\w+)", query.read_text(), re.IGNORECASE)[-1]
    root = project(Path(tempfile.mkdtemp(prefix=f"saturation-{name}-")), query, name, lateness)
    config = load_config(root)
    catalog = load_catalog(config)
    plan = catalog.plans[name]
    NexmarkFeed(config, catalog).start()  # the sources, empty, and the side input
    spark = spark_session(master="local[2]", conf={"spark.sql.shuffle.partitions": "2"})
    reports: list[BatchReport] = []
    refresher = Refresher(spark, config, catalog, report=reports.append)
    refresher.refresh()  # the view's bootstrap, over empty sources
    files = len(manifest["batches"])
    numbers = [
        list(range(n, min(n + files_per_batch, files + 1))) for n in range(1, files + 1, files_per_batch)
    ]
    numbers = numbers[:batches] if batches else numbers
    seconds, rounds, events = [], [], 0
    engines: Counter[str] = Counter()
    for group in numbers:
        for stream in SOURCES:
            ref = source_table(catalog.sources[stream], config.storage_options)
            table = pa.concat_tables(pq.read_table(batch_file(folder, stream, n)) for n in group)
            _append(ref.uri, with_zone(table, catalog.sources[stream].schema))
            ref.committed()
        events += sum(sum(manifest["batches"][n - 1].values()) for n in group)
        reports.clear()
        started = time.perf_counter()
        refresher.refresh()
        seconds.append(time.perf_counter() - started)
        rounds.append(list(reports))
        # (a batch the cost rule recomputes reports kind "recompute"; each kind with the engine it ran on)
        engines.update(f"{r.view}: {r.kind} on {r.engine}" for r in reports)
        print(
            f"{name}: batch {len(seconds)} of {len(numbers)}, {seconds[-1]:.2f} s",
            file=sys.stderr,
            flush=True,
        )
    result = {
        "query": name,
        "strategy": plan.strategy,
        "events": events,
        "batch_events": events // len(numbers),
        "batches": len(numbers),
        "refresh_s": [round(s, 3) for s in seconds],
        "eps": events / sum(seconds),
        "median_batch_s": statistics.median(seconds),
        "engines": dict(engines),
        "phases": phase_medians(rounds),
        # (the slowest batch's phases, ms: where a batch that stands out, a sweep or a recomputation, goes)
        "slowest_batch_phases": {
            f"{r.view} {p.name}": p.millis for r in rounds[seconds.index(max(seconds))] for p in r.phases
        },
        "peak_rss_mib": peak_rss_mib(),
        "lateness": lateness,
        "state_rows": state_rows(view_tables(plan, {}).state),
    }
    if full:
        snapshot = view_tables(plan, {}).snapshot
        before = snapshot.open().version()
        started = time.perf_counter()
        refresher.refresh(full=True, names=[name])
        result["full_s"] = time.perf_counter() - started
        result["full_eps"] = events / result["full_s"]
        if plan.by_arrival:  # q12's PROCTIME(): a recomputation cannot know when rows arrived
            result["equal"] = "n/a"
        else:
            ours, recomputed = read_table(spark, snapshot, version=before), read_table(spark, snapshot)
            recomputed = recomputed.select(*ours.columns)
            result["equal"] = ours.exceptAll(recomputed).isEmpty() and recomputed.exceptAll(ours).isEmpty()
        result["peak_rss_mib"] = peak_rss_mib()
    shutil.rmtree(root, ignore_errors=True)
    return result


def _append(uri: str, table: pa.Table) -> None:
    from deltalake import write_deltalake

    write_deltalake(uri, table, mode="append")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("events", type=Path, help="a folder of benchmarks/peers/events.py")
    parser.add_argument("query", help="q0 ... q22, or a .sql file of views over the example's sources")
    parser.add_argument("--files-per-batch", type=int, default=1, help="event files appended per refresh")
    parser.add_argument("--batches", type=int, help="refresh only this many batches (default: all files)")
    parser.add_argument("--full", action="store_true", help="then time Spark's recomputation and compare")
    parser.add_argument(
        "--lateness",
        help="give the view this allowed_lateness (an interval such as '1 minute'), bounding its state",
    )
    args = parser.parse_args()
    print(
        json.dumps(run(args.events, args.query, args.files_per_batch, args.full, args.batches, args.lateness))
    )


if __name__ == "__main__":
    main()
