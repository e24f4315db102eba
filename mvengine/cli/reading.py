"""`mv query`, `mv changes`, `mv history`, `mv describe`: the Python API's reads, printed."""

from __future__ import annotations

import json
from typing import Any

from mvengine.api import Project
from mvengine.cli.console import Console
from mvengine.cli.output import RowWriter
from mvengine.cli.stop import stop_on_signal
from mvengine.config import parse_duration
from mvengine.errors import MvError


def run_query(
    project: Project,
    console: Console,
    sql: str,
    *,
    as_of_source: list[str],
    fmt: str,
    out: str | None,
    limit: int | None,
) -> int:
    writer = RowWriter(console, fmt, out, limit=limit)
    df, reads = project.query_reads(sql, as_of_source=_cut(as_of_source))
    writer.write(df)
    footer = "read " + ", ".join(f"{name}@v{version}" for name, version in reads) if reads else ""
    writer.finish("; ".join(f for f in (footer, _served(project)) if f))
    return 0


def _served(project: Project) -> str:
    """Whose Spark ran the reads, when it was another process's (runtime/connect.py)."""
    pid = project.served_by
    return "" if pid is None else f"by the Spark of mv process {pid}"


def run_changes(
    project: Project,
    console: Console,
    view: str,
    *,
    from_version: int | None,
    to_version: int | None,
    since: str | None,
    upsert: bool,
    follow: bool,
    interval: str | None,
    fmt: str,
    out: str | None,
    limit: int | None,
) -> int:
    writer = RowWriter(console, fmt, out, limit=limit)
    if not follow:
        if interval is not None:
            raise MvError(
                "--interval only applies with --follow", hint=f"mv changes {view} --follow --interval 5s"
            )
        writer.write(project.changes(view, from_version, to_version, since=since, upsert=upsert))
        writer.finish(_served(project))
        return 0
    if to_version is not None:
        raise MvError("--follow keeps printing new versions, so it takes no --to-version")
    seconds = parse_duration(interval) if interval is not None else project.config.refresh_interval_s
    with stop_on_signal() as stopping:
        try:
            for part in project.follow_changes(
                view,
                from_version,
                since=since,
                upsert=upsert,
                interval=seconds,
                stopping=lambda: stopping() or _full(writer),
            ):
                writer.write(part)
        finally:
            writer.finish()
    return 0


def run_history(project: Project, console: Console, name: str, *, as_json: bool) -> int:
    entries = project.history(name)
    if as_json:
        for entry in entries:
            console.out(json.dumps(entry))
        return 0
    if entries and "batch_id" in entries[0]:
        console.table(
            ["version", "committed (UTC)", "batch", "kind", "changes", "inputs"],
            [
                [
                    str(e["version"]),
                    e["committed"],
                    str(e["batch_id"]),
                    e["kind"] + (" (redefined)" if e["redefined"] else ""),
                    "-" if e["changes"] is None else str(e["changes"]),
                    ", ".join(f"{n}@v{v}" for n, v in e["inputs"].items()),
                ]
                for e in entries
            ],
        )
    else:
        console.table(
            ["version", "committed (UTC)", "operation"],
            [[str(e["version"]), e["committed"], str(e["operation"])] for e in entries],
        )
    return 0


def run_describe(project: Project, console: Console, name: str, *, as_json: bool) -> int:
    info = project.describe(name)
    if as_json:
        console.out(json.dumps(info, indent=2))
        return 0
    width = max(len(k) for k in info)
    for key, value in info.items():
        console.out(f"{key.ljust(width)}  {_show(key, value)}")
    return 0


def _show(key: str, value: Any) -> str:
    if value is None:
        return "-"
    if key == "columns":
        return ", ".join(f"{c['name']} {c['type']}{'' if c['nullable'] else ' NOT NULL'}" for c in value)
    if key == "expectations":
        return ", ".join(f"{e['name']} ({e['on_violation']})" for e in value) or "-"
    if key == "last_batch_expectations":
        return (
            ", ".join(
                f"{o['table']}.{o['expectation']} {o['failed']} of {o['checked']} failed" for o in value
            )
            or "-"
        )
    if key in ("inputs", "source_versions"):
        return ", ".join(f"{n}@v{v}" for n, v in value.items()) or "-"
    if isinstance(value, dict):
        return ", ".join(f"{k}={'-' if v is None else v}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _cut(pairs: list[str]) -> dict[str, int] | None:
    """`--as-of-source SOURCE=VERSION` options as a dict."""
    cut: dict[str, int] = {}
    for pair in pairs:
        name, _, version = pair.partition("=")
        if not name.strip() or not version.strip().isdigit():
            raise MvError(
                f"--as-of-source {pair!r} is not SOURCE=VERSION", hint="e.g. --as-of-source user_scores=12"
            )
        cut[name.strip()] = int(version)
    return cut or None


def _full(writer: RowWriter) -> bool:
    return writer.limit is not None and writer.rows >= writer.limit
