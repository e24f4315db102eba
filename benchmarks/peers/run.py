"""Nexmark at saturation, side by side: Apache Flink, mvengine, and Spark's recomputation, on the same events.

`make bench-peers` runs this (PEERS_ARGS passes arguments). It writes the events once (events.py: files of
--file-events events per stream, cached in --folder), then for each query, one process at a time on the same
cores:

1. Flink (flink_nexmark.py, in benchmarks/peers/.venv): nexmark/nexmark's SQL over all the files, parallelism 2;
2. mvengine (mvengine_saturation.py), once per --batch-events size: the files appended batch by batch, each
   batch refreshed as `mv refresh --continuous` would (the first size's run then times Spark's recomputation
   of the view over all the events, and compares the snapshots);

and prints one markdown table: events/s per engine, mvengine's ratio to Flink per batch size, the
recomputation's events/s, whether the snapshots were equal, and the driver's peak resident memory. Each
query's results are also appended as JSON lines to --results.

    make bench-peers                                      # 10M events, batches of 100k and 1M, every query
    make bench-peers PEERS_ARGS="--events 2000000 --queries q0 q5 q11"
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

from events import write_events  # noqa: E402  (benchmarks/peers/events.py)

QUERIES = [f"q{n}" for n in range(23)]
FLINK_PYTHON = HERE / ".venv" / "bin" / "python"


def child(command: list[str], log: Path, timeout: float) -> dict:
    """Run one measurement in a process group of its own (its JVM included); its last stdout line is its JSON
    result. One that runs longer than `timeout` seconds is killed, and says so."""
    with log.open("a") as err:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=err, text=True, cwd=ROOT, start_new_session=True
        )
        try:
            out, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            return {"error": f"not done after {timeout:.0f} s (killed)"}
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if process.returncode or not lines:
        return {"error": f"exit {process.returncode}, see {log}"}
    return json.loads(lines[-1])


def commit() -> str:
    found = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    return found.stdout.strip() or "unknown"


def rate(result: dict) -> str:
    return f"{result['eps']:,.0f}" if "eps" in result else "—"


def ratio(ours: dict, theirs: dict) -> str:
    if "eps" not in ours or "eps" not in theirs:
        return "—"
    return f"{ours['eps'] / theirs['eps']:.2f}×"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--queries", nargs="*", default=QUERIES, help="default: q0 ... q22")
    parser.add_argument("--events", type=int, default=10_000_000, help="events in all (default 10M)")
    parser.add_argument(
        "--file-events", type=int, default=100_000, help="events per file of the event folder"
    )
    parser.add_argument(
        "--batch-events",
        type=int,
        nargs="+",
        default=[100_000, 1_000_000],
        help="mvengine's batch sizes, each a multiple of --file-events",
    )
    parser.add_argument("--rate", type=int, default=100_000, help="events per second of event time")
    parser.add_argument("--folder", type=Path, default=ROOT / "benchmarks" / "results" / "nexmark-events")
    parser.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results" / "peers.jsonl")
    parser.add_argument("--no-flink", action="store_true", help="mvengine and Spark only")
    parser.add_argument(
        "--timeout", type=float, default=900, help="seconds one engine's run of one query may take"
    )
    args = parser.parse_args()
    for size in args.batch_events:
        if size % args.file_events:
            parser.error(f"--batch-events {size} is not a multiple of --file-events {args.file_events}")
    manifest = write_events(args.folder, events=args.events, batch=args.file_events, rate=args.rate)
    args.results.parent.mkdir(parents=True, exist_ok=True)
    log = args.results.with_suffix(".log")
    sizes = ", ".join(f"{s:,}" for s in args.batch_events)
    print(
        f"Nexmark, {manifest['events']:,} events at {args.rate:,} events/s of event time; mvengine batches of "
        f"{sizes} events; commit {commit()}; 2 cores; logs in {log}\n"
    )
    mv_heads = " | ".join(f"mvengine {s:,} | ÷ Flink" for s in args.batch_events)
    print(
        f"| query | Flink ev/s | {mv_heads} | Spark recompute ev/s | equal | driver peak RSS MiB (Python + JVM) |"
    )
    print("|---|---:|" + "---:|---:|" * len(args.batch_events) + "---:|---|---:|")
    for query in args.queries:
        flink = (
            {"error": "not run"}
            if args.no_flink
            else child(
                [str(FLINK_PYTHON), str(HERE / "flink_nexmark.py"), str(args.folder), query],
                log,
                args.timeout,
            )
        )
        ours = []
        for n, size in enumerate(args.batch_events):
            command = [sys.executable, str(HERE / "mvengine_saturation.py"), str(args.folder), query]
            command += ["--files-per-batch", str(size // args.file_events)] + (["--full"] if n == 0 else [])
            ours.append(child(command, log, args.timeout))
        with args.results.open("a") as out:
            out.write(json.dumps({"commit": commit(), "flink": flink, "mvengine": ours}) + "\n")
        cells = " | ".join(f"{rate(r)} | {ratio(r, flink)}" for r in ours)
        first = ours[0]
        recompute = f"{first['full_eps']:,.0f}" if "full_eps" in first else "—"
        memory = max(
            (r["peak_rss_mib"]["python"] + r["peak_rss_mib"]["jvm"] for r in ours if "peak_rss_mib" in r),
            default=0,
        )
        flink_cell = rate(flink) if "eps" in flink else flink.get("error", "?")[:80]
        print(
            f"| {query} | {flink_cell} | {cells} | {recompute} | {first.get('equal', '—')} | {memory:,.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
