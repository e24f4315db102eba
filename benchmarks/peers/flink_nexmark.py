"""Apache Flink on one Nexmark query, over benchmarks/peers/events.py's files (run by the peers' venv).

A local mini-cluster (PyFlink's, parallelism 2 on this machine's 2 cores) runs nexmark/nexmark's Flink SQL of
the query (benchmarks/peers/flink/qN.sql) in streaming mode: the three streams are filesystem tables over the
events' Parquet folders, each with Nexmark's watermark (`date_time - 4 s`), read whole (a bounded streaming
source: at its end the watermark jumps to the end of time and every window closes); the query's rows go to
the blackhole sink. The settings are nexmark/nexmark's config.yaml's where they apply on one machine: RocksDB
state, checkpoints every 3 minutes exactly once, mini-batches of 2 s / 50,000 rows, split distinct aggregates.

Prints one JSON object: events (of all three streams, as Nexmark counts them), the job's net run time (Flink's
JobExecutionResult: in the cluster, from the job's start to its end, as mvengine's refreshes are timed
without Spark's start) with events/s over it, and the wall time from submitting the job to its end (the
mini-cluster's start and the planner included); "error" when Flink refused the query (its innermost cause).

    benchmarks/peers/.venv/bin/python benchmarks/peers/flink_nexmark.py /tmp/nexmark-events q5
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
JARS = HERE / "jars"  # flink-sql-parquet and Hadoop's client (Parquet's reader needs its Configuration)

STREAMS = {
    "person": "id BIGINT, name STRING, email_address STRING, credit_card STRING, city STRING, state STRING, "
    "date_time TIMESTAMP(3), extra STRING",
    "auction": "id BIGINT, item_name STRING, description STRING, initial_bid BIGINT, reserve BIGINT, "
    "date_time TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT, category BIGINT, extra STRING",
    "bid": "auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING, date_time TIMESTAMP(3), "
    "extra STRING",
}


def statements(query: str) -> list[str]:
    """The query file's statements, its comments left out: any views first, the SELECT last."""
    text = "\n".join(
        line
        for line in (HERE / "flink" / f"{query}.sql").read_text().splitlines()
        if not line.lstrip().startswith("--")
    )
    return [s.strip() for s in text.split(";") if s.strip()]


def run(folder: Path, query: str, state: str) -> dict:
    from pyflink.table import EnvironmentSettings, TableDescriptor, TableEnvironment

    events = sum(sum(b.values()) for b in json.loads((folder / "events.json").read_text())["batches"])
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    conf = env.get_config()
    checkpoints = tempfile.mkdtemp(prefix=f"flink-{query}-")
    for key, value in {
        "pipeline.jars": ";".join(p.as_uri() for p in sorted(JARS.glob("*.jar"))),
        "parallelism.default": "2",
        "table.local-time-zone": "UTC",
        "state.backend.type": state,
        "execution.checkpointing.dir": Path(checkpoints).as_uri(),
        "execution.checkpointing.interval": "180 s",
        "execution.checkpointing.mode": "EXACTLY_ONCE",
        "table.exec.mini-batch.enabled": "true",
        "table.exec.mini-batch.allow-latency": "2 s",
        "table.exec.mini-batch.size": "50000",
        "table.optimizer.distinct-agg.split.enabled": "true",
    }.items():
        conf.set(key, value)
    for stream, columns in STREAMS.items():
        env.execute_sql(
            f"CREATE TABLE {stream} ({columns}, WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND) "
            f"WITH ('connector' = 'filesystem', 'path' = '{(folder / stream).as_uri()}', 'format' = 'parquet')"
        )
    env.execute_sql(
        "CREATE TABLE side_input (key BIGINT, `value` STRING) WITH ('connector' = 'filesystem', "
        f"'path' = '{(folder / 'side_input').as_uri()}', 'format' = 'parquet')"
    )
    *views, select = statements(query)
    result: dict = {"query": query, "events": events, "state": state}
    try:
        for view in views:
            env.execute_sql(view)
        table = env.sql_query(select)
        started = time.perf_counter()
        submitted = table.execute_insert(TableDescriptor.for_connector("blackhole").build())
        submitted.wait()
        result["wall_s"] = time.perf_counter() - started
        job = submitted.get_job_client()
        assert job is not None  # (an INSERT is a job)
        result["seconds"] = job.get_job_execution_result().result().get_net_runtime() / 1000
        result["eps"] = events / result["seconds"]
    except Exception as error:  # Flink's refusal of a query is the result, reported in the table
        lines = [line.strip() for line in str(error).splitlines() if re.search(r"Exception: ", line)]
        causes = [line for line in lines if line.startswith("Caused by:")]
        result["error"] = "refused: " + (causes or lines or [str(error)])[-1][:300]  # the innermost cause
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("events", type=Path, help="a folder of benchmarks/peers/events.py")
    parser.add_argument("query", help="q0 ... q22")
    parser.add_argument("--state", default="rocksdb", help="Flink's state backend: rocksdb or hashmap")
    args = parser.parse_args()
    print(json.dumps(run(args.events, args.query, args.state)), flush=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
