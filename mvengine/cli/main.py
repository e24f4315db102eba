"""mvengine's command line. Every command is a function over the project; MvErrors print as one red
`Error:` line with a hint and exit 1 (the traceback only with --debug)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import traceback
from collections.abc import Sequence
from typing import Any, NoReturn

from mvengine import __version__
from mvengine.cli.console import Console
from mvengine.cli.graph import FORMATS
from mvengine.cli.output import FORMATS as FORMATS_OUT
from mvengine.errors import MvError

DESCRIPTION = """\
mvengine keeps SQL materialized views fresh, incrementally, on Delta Lake with Apache Spark.
A project is a folder with conf/mvengine.toml (settings) and views/*.sql (sources and views)."""

EPILOG = """\
The `mv` command is the same as `mvengine`, except that a call whose first word is not one of
mvengine's commands or options goes to the system's file-move command: `mv a.txt b.txt` still moves.

examples:
  mv sources                 list the source tables declared in views/ and whether they exist
  mv sources --create        create the missing ones (Delta tables with the change data feed on)
  mv plan                    how every view will be maintained: columns, key, changelog, strategy, state
  mv plan team_totals --json the same for one view, as JSON
  mv graph > dag.mmd         the DAG of sources and views as a Mermaid flowchart
  mv refresh                 bring every view up to date, then exit
  mv refresh --continuous    keep every view fresh until Ctrl-C
  mv query "SELECT * FROM team_totals VERSION AS OF 3"
                             Spark SQL over views and sources, at any version or time
  mv changes team_totals     the view's changelog: +I, -U, +U, -D rows (--follow to keep printing)
  mv history team_totals     one line per version: batch, changes, input versions
  mv describe team_totals    paths, key, strategy, size, lineage and freshness (--json)
  mv status --watch          every source and view at a glance, redrawn live (no Spark)
  mv ui                      the same as a live web page: the DAG, batch plots, changelog tail, plans
  mv load user_scores new.csv  append a CSV / JSON lines / Parquet file to a source (--upsert, --delete-where)
  mv validate                every expectation on the current tables (exit 1 when a FAIL UPDATE one fails)
  mv quarantine user_scores  the rows its QUARANTINE expectations refused (--replay: write back repaired ones)
  mv demo                    a live stream of changes into the example sources (a batch a second)
  mv init my_project         start a new project
"""


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--project",
        default=".",
        metavar="DIR",
        help="project folder holding conf/mvengine.toml and views/ (default: current folder)",
    )
    parser.add_argument("--debug", action="store_true", help="show Python tracebacks for errors")
    parser.add_argument("--version", action="version", version=f"mvengine {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    sources = commands.add_parser(
        "sources",
        help="list (and create) the source tables declared in views/",
        description="List the source tables declared with CREATE TABLE in views/*.sql: path, key, mode, "
        "and the Delta version when the table exists. With --create, missing tables are created "
        "empty with delta.enableChangeDataFeed = true; existing ones are checked (CDF on, "
        "columns as declared).",
    )
    sources.add_argument("--create", action="store_true", help="create the source tables that are missing")
    sources.add_argument("--json", action="store_true", help="print a JSON document instead of a table")
    plan = commands.add_parser(
        "plan",
        help="show how each view will be maintained (no Spark needed)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Parse and resolve every source and view in views/, then print the DAG in dependency order "
        "and, per view: its inputs, output columns with types, unique key (or bag), changelog kind "
        "(append-only / upsert / retract), maintenance strategy (incremental, or full with the "
        "reason), the state the incremental rule keeps and whether it stays bounded, and the "
        "operator tree. Mistakes in the SQL are reported with file, line and a suggestion.",
        epilog="changelog kinds:\n"
        "  append-only  inputs are append-only and no operator retracts: only +I rows\n"
        "  upsert       the view has a unique key: changes are -U/+U pairs and -D by key\n"
        "  retract      the view is a bag (no key): changes are whole-row +I and -D\n"
        "\nWith [plan] require_bounded_state = true in conf/mvengine.toml, a view whose state grows\n"
        "without bound is an error. WITH ('state_ttl' = '7 days') bounds a GROUP BY or DISTINCT\n"
        "view, or one that ranks, computes windows or forms sessions per partition:\n"
        "a key untouched for that long leaves the view and its state (docs/guides/state-ttl.md).",
    )
    plan.add_argument("views", nargs="*", metavar="VIEW", help="views to show (default: all)")
    plan.add_argument("--json", action="store_true", help="print a stable JSON document instead of text")
    graph = commands.add_parser(
        "graph",
        help="draw the DAG of sources and views (Mermaid, DOT, SVG, PNG)",
        description="Print the dependency DAG of sources and views: as a Mermaid flowchart (default; paste it "
        "into Markdown), as Graphviz DOT, or draw it to an SVG or PNG file with Graphviz's `dot`. "
        "Sources are cylinders, incremental views green rounded boxes, full-refresh views dashed "
        "red boxes.",
    )
    graph.add_argument(
        "--format", choices=FORMATS, default="mermaid", help="output format (default: mermaid)"
    )
    graph.add_argument(
        "--out", metavar="FILE", help="write to FILE instead of standard output (required for svg and png)"
    )
    refresh = commands.add_parser(
        "refresh",
        help="bring views up to date with their inputs",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Bring the named views (default: all), and the views they read, up to date with every input "
        "commit that exists when the command starts, in dependency order; then exit. A new view, or "
        "one whose SQL changed, is first computed from its inputs (and says so). Incremental views "
        "then apply only the inputs' changes; full-refresh views (see `mv plan`) are recomputed "
        "when an input moved. Every view ends at the same cut: the sources' versions when the "
        "command started, whatever path (through other views) leads to them. Each committed batch "
        "prints one line: view, batch, input versions, changes in, changelog rows out, milliseconds.",
        epilog="examples:\n"
        "  mv refresh                     every view, once\n"
        "  mv refresh team_totals         that view and what it reads\n"
        "  mv refresh --full              recompute every view from its inputs\n"
        "  mv refresh --continuous        keep every view fresh until Ctrl-C or SIGTERM\n"
        "  mv refresh --wait              wait for a refresh under way in another process, then run\n"
        "  mv refresh --dry-run           say what each view would do, and why; write nothing\n",
    )
    refresh.add_argument("views", nargs="*", metavar="VIEW", help="views to refresh (default: all)")
    refresh.add_argument(
        "--full", action="store_true", help="recompute from the inputs instead of applying their changes"
    )
    refresh.add_argument(
        "--continuous",
        action="store_true",
        help="keep refreshing as inputs change, until Ctrl-C or SIGTERM (which stop cleanly after "
        "the current batch)",
    )
    refresh.add_argument(
        "--interval",
        metavar="DURATION",
        help="with --continuous: how often to look for new input commits (default: [refresh] interval, 1s)",
    )
    refresh.add_argument(
        "--metrics-port",
        metavar="PORT",
        type=int,
        help="with --continuous: serve Prometheus metrics at http://127.0.0.1:PORT/metrics (0: a free port, "
        "printed): per view its batches, rows in and out, batch time, lag, rows, state and whether its last "
        "batch failed; quarantined rows; and this process's batch counts and times. mv ui serves the "
        "warehouse's at /metrics too",
    )
    refresh.add_argument(
        "--wait",
        action="store_true",
        help="when another process is refreshing this project's warehouse, wait for it to end "
        "instead of stopping with an error (one refresh at a time per warehouse)",
    )
    refresh.add_argument(
        "--dry-run",
        action="store_true",
        help="print the step each view would take and why (rebuild, apply its inputs' changes, recompute, "
        "fire timers: EMIT, temporal filters, state_ttl; skip, or wait for an input), read from the Delta "
        "logs alone: no Spark starts and "
        "nothing is written. Where a batch runs (driver or Spark) is chosen once its changes are counted",
    )
    refresh.add_argument(
        "--profile",
        action="store_true",
        help="under each batch line, where its time went: each phase (start query, read "
        "changes, plan delta rule, compute changes, each commit) with its milliseconds "
        "and Spark jobs",
    )
    _reading_commands(commands)
    demo = commands.add_parser(
        "demo",
        help="write a live stream of changes into the example project's sources",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="In a Nexmark project (examples/nexmark: sources person, auction and bid), write Nexmark's "
        "event stream at --rate events per second (of every 50 events: 1 person, 3 auctions, 46 "
        "bids). Otherwise, write a realistic stream of changes into the example project's sources "
        "(user_scores and users, as declared in this repository's views/sources.sql): every --interval, a few new "
        "scores with event times near now, some minutes late and out of order; now and then a user "
        "renamed (old key deleted, new key inserted), a user moving country, or a score taken back "
        "(a compensating event with the negated score: user_scores is append-only). Run "
        "`mv refresh --continuous` in another terminal to watch the views follow, and "
        "`mv changes team_totals --follow` to see their undo rows as they happen.",
        epilog="examples:\n"
        "  mv demo                              a batch every second for a minute\n"
        "  mv demo --interval 200ms --duration 10s --seed 7\n"
        "  mv --project examples/nexmark demo --rate 5000   Nexmark's person, auction and bid events\n",
    )
    demo.add_argument(
        "--interval", default="1s", metavar="DURATION", help="time between batches (default: 1s)"
    )
    demo.add_argument(
        "--duration", default="60s", metavar="DURATION", help="how long to write (default: 60s)"
    )
    demo.add_argument(
        "--seed", type=int, metavar="N", help="random seed: the same seed writes the same changes"
    )
    demo.add_argument(
        "--rate",
        type=int,
        default=1000,
        metavar="N",
        help="in a Nexmark project (examples/nexmark): events per second of event time, written "
        "a batch per --interval (default: 1000)",
    )
    init = commands.add_parser(
        "init",
        help="start a new project: settings, one source, one view, a .gitignore",
        description="Create folder DIR with conf/mvengine.toml (every setting, commented out at its default), "
        "views/sources.sql (one source table), views/customer_totals.sql (one view) and a .gitignore "
        "for the warehouse, then print the next commands to run. Writes nothing where a project is.",
    )
    init.add_argument("dir", metavar="DIR", help="the new project's folder")
    return parser


def _reading_commands(commands) -> None:
    query = commands.add_parser(
        "query",
        help="run Spark SQL over the views and sources, at any past version",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run one Spark SQL query over view snapshots and sources, named as in views/. Each table is "
        "read at its latest version unless the query says otherwise:\n"
        "  FROM v VERSION AS OF 12                         version 12 of v\n"
        "  FROM v TIMESTAMP AS OF '2026-11-21 12:03:00'     the last version committed at or before\n"
        "  FROM v FOR SYSTEM_TIME AS OF TIMESTAMP '...'    the same, in SQL:2011 words\n"
        "  ... AS OF SYSTEM TIME '2026-11-21 12:03:00'     at the end: for every table of the query\n"
        "Times are UTC unless they carry an offset; a table's own clause wins over the query's. "
        "--as-of-source SOURCE=VERSION reads every view at its latest version that reflects no "
        "newer version of SOURCE (a consistent cut across views) and SOURCE itself at VERSION.",
        epilog="examples:\n"
        '  mv query "SELECT * FROM team_totals ORDER BY total DESC"\n'
        '  mv query "SELECT * FROM team_totals VERSION AS OF 3"\n'
        '  mv query "SELECT n.team, n.total - o.total AS gained FROM team_totals n\n'
        "            JOIN team_totals TIMESTAMP AS OF '2026-11-22 12:00:00' o ON n.team = o.team\"\n"
        '  mv query "SELECT * FROM large_team_totals" --as-of-source user_scores=5 --format json\n',
    )
    query.add_argument("sql", metavar="SQL", help="one SELECT query, in quotes")
    query.add_argument(
        "--as-of-source",
        action="append",
        default=[],
        metavar="SOURCE=VERSION",
        help="read views as of this source version (repeat for several sources)",
    )
    _output_options(query)
    changes = commands.add_parser(
        "changes",
        help="print a view's changelog (+I/-U/+U/-D), or follow it as batches land",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Print the changes a view went through, in the order they were emitted (by snapshot version, "
        "then key). Retract form (default): every +I, -U, +U and -D row with _undo true for the rows "
        "that take back an earlier one (-U, -D). Upsert form (--upsert, views with a key): one row "
        "per key change with its new values; a delete is the key with _tombstone true. Columns: the "
        "view's, then _op, _undo (or _tombstone), _mtime (commit time of the input change), "
        "_version (snapshot version), _batch_id, _emit_index (revision of the key's row).",
        epilog="examples:\n"
        "  mv changes team_totals                       every change so far\n"
        "  mv changes team_totals --from-version 5      from snapshot version 5 on\n"
        "  mv changes team_totals --since '2026-11-22 12:00:00' --upsert\n"
        "  mv changes team_totals --follow              keep printing as batches land (Ctrl-C stops)\n",
    )
    changes.add_argument("view", metavar="VIEW")
    changes.add_argument("--from-version", type=int, metavar="N", help="first snapshot version (default: 0)")
    changes.add_argument(
        "--to-version", type=int, metavar="N", help="last snapshot version (default: latest)"
    )
    changes.add_argument(
        "--since",
        metavar="TIMESTAMP",
        help="start at the first version committed at or after this time (UTC)",
    )
    changes.add_argument("--upsert", action="store_true", help="upsert form instead of retract form")
    changes.add_argument(
        "--follow",
        action="store_true",
        help="after the changes so far, print each new batch's as it lands, until Ctrl-C",
    )
    changes.add_argument(
        "--interval",
        metavar="DURATION",
        help="with --follow: how often to look for new batches (default: [refresh] interval)",
    )
    _output_options(changes)
    history = commands.add_parser(
        "history",
        help="one line per version of a view (batch, kind, changes, input versions); no Spark",
        description="List every version of a view's snapshot still in its Delta log: commit time (UTC), batch "
        "id, kind (bootstrap: first computation, stream: incremental batch, full: recomputation), "
        "changelog rows, and the input versions it reflects. For a source: its Delta commits.",
    )
    history.add_argument("name", metavar="NAME", help="a view (or a source)")
    history.add_argument(
        "--json", action="store_true", help="one JSON object per version, with source_versions"
    )
    describe = commands.add_parser(
        "describe",
        help="what a view or source is, where its tables are, how big and how fresh; no Spark",
        description="Describe a view (or source): kind, file and line, table paths, key, changelog kind, "
        "strategy (incremental, or full and why), columns, latest version and the input versions "
        "it reflects, the source versions it reflects through other views (source_versions), row "
        "count, table sizes, last refresh time, and freshness: stale_since is the commit time of "
        "the oldest source commit the view does not reflect yet, freshness_lag_s the seconds since "
        "then (0 when up to date).",
    )
    describe.add_argument("name", metavar="NAME", help="a view or source")
    describe.add_argument("--json", action="store_true", help="print a JSON document")
    status = commands.add_parser(
        "status",
        help="every source and view at a glance: version, lag, last batch, size, trouble; no Spark",
        description="One line per source and view, from the Delta logs alone (no Spark): kind, strategy, version, "
        "behind (commits of its sources the view does not reflect yet), lag_s (seconds since the "
        "oldest of them; 0 when fresh), the time (UTC) of its last batch (a source: its last commit), "
        "changes in ('all' for a recomputation), changelog rows out and milliseconds, rows, state size "
        "on disk, and a note: the refresh holding the lock, the error the last batch failed with, or a "
        "batch left half-done. On a terminal, stale views are yellow and failing ones red.",
    )
    status.add_argument(
        "--json", action="store_true", help="print a JSON list, one object per source and view"
    )
    status.add_argument("--watch", action="store_true", help="redraw in place until Ctrl-C, like top")
    status.add_argument(
        "--interval",
        default="1s",
        metavar="DURATION",
        help="with --watch: time between redraws (default: 1s)",
    )
    ui = commands.add_parser(
        "ui",
        help="a live web page of the pipeline: the DAG, batch plots, changelog tail, plans; no Spark",
        description="Serve a page on http://127.0.0.1:PORT that shows the DAG of sources and views (each node "
        "coloured by freshness and strategy), and for the view you click: plots of batch duration, "
        "rows in and out and freshness lag over its last batches, the tail of its changelog, its plan "
        "(why it is full, when it is) and its expectations' outcomes. It updates itself every "
        "second without a reload, reads the same Delta logs as mv status and never writes.",
    )
    ui.add_argument("--port", type=int, default=8765, help="port to listen on (default: 8765)")
    ui.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default: 127.0.0.1, this machine only; 0.0.0.0 shows the page "
        "to your network, with no login)",
    )
    load = commands.add_parser(
        "load",
        help="append (or upsert) rows from a CSV, JSON lines or Parquet file into a source",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Write the rows of FILE (or standard input, '-') into SOURCE, converted to its declared "
        "columns and types: CSV with a header line, JSON lines (one object per line), or Parquet, "
        "by the file's extension or --format. A value that does not fit its column stops the load "
        "with the line and column, and nothing is written. Columns the file lacks are NULL (an "
        "error for NOT NULL ones); columns the source lacks are an error. A time without an offset is "
        "UTC. A keyed source refuses a key twice in the file, and a key it holds already unless "
        "--upsert. The rows are one Delta commit: the next mv refresh applies them.",
        epilog="examples:\n"
        "  mv load user_scores scores.csv                  append\n"
        "  mv load users users.jsonl --upsert              insert new keys, replace rows of known ones\n"
        "  cat more.csv | mv load user_scores - --format csv\n"
        "  mv load users --delete-where \"country = 'XX'\"   delete rows (no file)\n",
    )
    load.add_argument("source", metavar="SOURCE")
    load.add_argument("file", nargs="?", metavar="FILE", help="the file to load, or - for standard input")
    load.add_argument(
        "--format",
        choices=("csv", "json", "parquet"),
        help="the file's format (default: by its extension; needed for standard input)",
    )
    load.add_argument(
        "--upsert",
        action="store_true",
        help="for a source with a PRIMARY KEY: a MERGE by the key (rows of new keys inserted, rows "
        "of known keys replaced)",
    )
    load.add_argument(
        "--delete-where",
        metavar="EXPR",
        help="delete the source's rows where this SQL condition holds (a commit of its own, "
        "before FILE's rows are written, when one is given)",
    )
    validate = commands.add_parser(
        "validate",
        help="run every expectation on the current tables and print what fails",
        description="Run the expectations (CONSTRAINT ... EXPECT) of the named sources and views, or of all that "
        "declare any, with great-expectations on their current tables: a source as written, a view's "
        "snapshot (its dropped rows already left out). Exits 1 when a FAIL UPDATE expectation fails "
        "(the next refresh would stop on it). Tables of up to a million rows are read by delta-rs and "
        "validated without Spark.",
    )
    validate.add_argument("names", nargs="*", metavar="NAME", help="sources and views (default: all)")
    validate.add_argument(
        "--json", action="store_true", help="print a JSON document, with failing rows' samples"
    )
    quarantine = commands.add_parser(
        "quarantine",
        help="show the rows a table's QUARANTINE expectations refused; --replay repaired ones",
        description="Show the rows of a source or view that its ON VIOLATION QUARANTINE expectations refused, "
        "each with _expectation, _version (the source version, or the view's batch) and _batch. "
        "Repair them in the quarantine table (its path is in mv describe NAME --json), or relax the "
        "expectation, then --replay: a source's rows that pass every dropping expectation now are "
        "written back into the source (appended, or upserted by its PRIMARY KEY) and leave the "
        "quarantine; the next mv refresh applies them. A view's pass-now rows just leave it (the view "
        "is recomputed when its expectation changes).",
    )
    quarantine.add_argument("name", metavar="NAME", help="a source or view")
    quarantine.add_argument(
        "--replay", action="store_true", help="write the rows that pass now back into the source, once"
    )
    quarantine.add_argument("--json", action="store_true", help="one JSON object per row")


def _output_options(command) -> None:
    command.add_argument(
        "--format",
        choices=FORMATS_OUT,
        default="table",
        help="table (aligned, with a row count; default), json (one object per line), csv, or "
        "parquet (with --out)",
    )
    command.add_argument("--out", metavar="FILE", help="write to FILE instead of standard output")
    command.add_argument("--limit", type=int, metavar="N", help="print at most N rows")


COMMANDS = (
    "sources",
    "plan",
    "graph",
    "refresh",
    "query",
    "changes",
    "history",
    "describe",
    "status",
    "ui",
    "load",
    "validate",
    "quarantine",
    "demo",
    "init",
)


def main(argv: Sequence[str] | None = None, prog: str = "mvengine") -> int:
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    console = Console()
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return _run(args, console)
    except MvError as e:
        if args.debug:
            traceback.print_exc()
        console.error(e)
        return 1
    except KeyboardInterrupt:
        console.error("interrupted")
        return 130
    except BrokenPipeError:  # the reader of our output stopped early (`mv changes v | head`): not an error
        os.dup2(
            os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno()
        )  # Python's own flush at exit must not fail
        return 141
    except Exception as e:  # noqa: BLE001 (a failure inside mvengine or Spark: one line too; traceback with --debug)
        if args.debug:
            traceback.print_exc()
        console.error(internal_error(e))
        return 1


def internal_error(e: BaseException) -> MvError:
    """An unexpected exception as an error line: its first meaningful line (a Java exception's message, not
    py4j's "An error occurred while calling o123.foo"), what mvengine was doing, and what to do."""
    lines = [line.strip().removeprefix(": ").strip() for line in str(e).splitlines()]
    lines = [
        line for line in lines if line and not line.startswith(("An error occurred while calling", "at "))
    ]
    summary = lines[0] if lines else type(e).__name__
    if len(summary) > 300:
        summary = summary[:297] + "..."
    context = "; ".join(getattr(e, "__notes__", []))
    return MvError(
        f"{context + ': ' if context else ''}internal error: {summary}",
        hint="this is a failure inside mvengine or Spark, not a mistake in your project: run the same "
        "command with --debug for the full traceback, and report it",
    )


def _run(args: argparse.Namespace, console: Console) -> int:
    from mvengine.config import load_config

    if args.command == "init":
        return _init(console, args.dir)
    config = load_config(args.project)
    if args.command == "sources":
        return _sources(config, console, create=args.create, as_json=args.json)
    if args.command == "plan":
        from mvengine.cli.plan import print_plan

        return print_plan(config, console, args.views, as_json=args.json)
    if args.command == "graph":
        return _graph(config, console, args.format, args.out)
    if args.command == "demo":
        return _demo(config, console, args.interval, args.duration, args.seed, args.rate)
    from mvengine.api import Project

    project = Project(config)
    if args.command == "refresh":
        from mvengine.cli.refresh import run_refresh

        return run_refresh(
            project,
            console,
            args.views,
            full=args.full,
            continuous=args.continuous,
            interval=args.interval,
            metrics_port=args.metrics_port,
            profile=args.profile,
            wait=args.wait,
            dry_run=args.dry_run,
        )
    from mvengine.cli import reading

    if args.command == "query":
        return reading.run_query(
            project,
            console,
            args.sql,
            as_of_source=args.as_of_source,
            fmt=args.format,
            out=args.out,
            limit=args.limit,
        )
    if args.command == "changes":
        return reading.run_changes(
            project,
            console,
            args.view,
            from_version=args.from_version,
            to_version=args.to_version,
            since=args.since,
            upsert=args.upsert,
            follow=args.follow,
            interval=args.interval,
            fmt=args.format,
            out=args.out,
            limit=args.limit,
        )
    if args.command == "history":
        return reading.run_history(project, console, args.name, as_json=args.json)
    if args.command == "describe":
        return reading.run_describe(project, console, args.name, as_json=args.json)
    if args.command == "status":
        from mvengine.cli.status import run_status
        from mvengine.config import parse_duration

        return run_status(
            project, console, as_json=args.json, watch=args.watch, interval=parse_duration(args.interval)
        )
    if args.command == "ui":
        from mvengine.cli.ui import run_ui

        return run_ui(project, console, host=args.host, port=args.port)
    if args.command == "load":
        from mvengine.cli.load import run_load

        return run_load(
            project,
            console,
            args.source,
            args.file,
            fmt=args.format,
            upsert=args.upsert,
            delete_where=args.delete_where,
        )
    from mvengine.cli import quality

    if args.command == "validate":
        return quality.run_validate(project, console, args.names, as_json=args.json)
    if args.command == "quarantine":
        return quality.run_quarantine(project, console, args.name, do_replay=args.replay, as_json=args.json)
    raise AssertionError(args.command)


def _init(console: Console, folder: str) -> int:
    import shlex

    from mvengine.scaffold import NEXT_STEPS, init_project

    written = init_project(folder)
    console.out(
        f"created {len(written)} files in {folder}: " + ", ".join(str(p.relative_to(folder)) for p in written)
    )
    console.out(f"next, in {folder} (cd {shlex.quote(folder)}):")
    width = max(len(command) for command, _ in NEXT_STEPS)
    for command, why in NEXT_STEPS:
        console.out(f"  {command.ljust(width)}  # {why}")
    return 0


def _demo(config, console: Console, interval: str, duration: str, seed: int | None, rate: int) -> int:
    from mvengine.cli.stop import stop_on_signal
    from mvengine.config import parse_duration
    from mvengine.demo import run_demo
    from mvengine.project.catalog import load_catalog
    from mvengine.runtime.catalog import catalog_tables

    every, total = parse_duration(interval), parse_duration(duration)
    if every <= 0:
        raise MvError("--interval must be more than 0", hint="e.g. --interval 500ms")
    if rate <= 0:
        raise MvError("--rate must be more than 0 events per second", hint="e.g. --rate 1000")
    with stop_on_signal() as stopping:
        batches = run_demo(
            config,
            load_catalog(config, catalog_tables(config)),
            interval=every,
            duration=total,
            seed=seed,
            rate=rate,
            report=console.out,
            stopping=stopping,
        )
    console.out(f"wrote {batches} batches of changes")
    return 0


def _graph(config, console: Console, fmt: str, out: str | None) -> int:
    from pathlib import Path

    from mvengine.cli.graph import render_image, to_dot, to_mermaid
    from mvengine.project.catalog import load_catalog
    from mvengine.runtime.catalog import catalog_tables

    if fmt in ("svg", "png") and not out:
        raise MvError(
            f"--format {fmt} draws an image file: give it a name with --out FILE",
            hint=f"e.g. mv graph --format {fmt} --out dag.{fmt}",
        )
    catalog = load_catalog(config, catalog_tables(config))
    if fmt in ("svg", "png"):
        assert out is not None  # checked above
        render_image(to_dot(catalog), fmt, Path(out))
        console.out(f"wrote {out}")
        return 0
    text = to_mermaid(catalog) if fmt == "mermaid" else to_dot(catalog)
    if out:
        Path(out).write_text(text, encoding="utf-8")
        console.out(f"wrote {out}")
    else:
        console.out(text.rstrip("\n"))
    return 0


def _sources(config, console: Console, *, create: bool, as_json: bool) -> int:
    from mvengine.plan.types import type_name
    from mvengine.project.catalog import load_sources
    from mvengine.runtime.catalog import catalog_tables
    from mvengine.storage.sources import ensure_source_table
    from mvengine.storage.tables import TableRef

    rows: list[dict[str, Any]] = []
    for source in load_sources(config, catalog_tables(config)).values():
        ref = TableRef(source.path, config.storage_options, source.name)
        created = (
            ensure_source_table(ref, source.schema, declared_at=f"{source.file}:{source.line}")
            if create
            else False
        )
        version = ref.open().version() if ref.exists() else None
        rows.append(
            {
                "name": source.name,
                "kind": "source",
                "path": source.path,
                "table": source.catalog_table,
                "file": source.file,
                "line": source.line,
                "key": list(source.key) if source.key else None,
                "append_only": source.append_only,
                "watermark": source.watermark_sql(),
                "idle_timeout_seconds": source.idle_timeout_seconds(),
                "columns": [
                    {"name": f.name, "type": type_name(t), "nullable": f.nullable}
                    for f, t in zip(source.schema, source.sql_types)
                ],
                "exists": version is not None,
                "created": created,
                "version": version,
            }
        )
    if as_json:
        console.out(json.dumps({"sources": rows}, indent=2))
        return 0
    if not rows:
        console.out("no sources declared in views/ (write CREATE TABLE statements there)")
        return 0
    console.table(
        ["source", "key", "mode", "version", "path"],
        [
            [
                r["name"],
                ", ".join(r["key"]) if r["key"] else "-",
                "append" if r["append_only"] else "update",
                ("created at v0" if r["created"] else f"v{r['version']}") if r["exists"] else "missing",
                r["path"],
            ]
            for r in rows
        ],
    )
    if not create and any(not r["exists"] for r in rows):
        console.out("create the missing tables with: mv sources --create")
    return 0


def leave(code: int) -> NoReturn:
    """End the process with `code` once its output is flushed, skipping the interpreter's teardown: Arrow's and
    delta-rs's native thread pools, torn down there while a worker thread lives, abort the process now and then
    ("terminate called without an active exception", exit 134) after the command has done its work. Spark's
    JVM ends by itself when its pipe to this process closes, running its own shutdown hooks."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more to write anyway
            pass
    os._exit(code)


def entry() -> NoReturn:
    """The `mvengine` command."""
    leave(main())


if __name__ == "__main__":
    entry()
