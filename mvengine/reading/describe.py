"""`mv describe` and `mv history`: what a source or view is and what its tables hold, from the plan and the
Delta logs alone (no Spark). DESIGN.md §5 lists the fields describe must report; the rest says how big and how
fresh a view is."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from mvengine.config import join_uri
from mvengine.plan.types import type_name
from mvengine.plan.windows import duration
from mvengine.project.catalog_tables import registered_names
from mvengine.project.layout import source_quarantine, view_tables
from mvengine.reading.versions import Versions, show_time
from mvengine.storage.objects import is_local, list_folders, local_path
from mvengine.storage.tables import TableRef, commit_history

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# The fields of `mv describe --json`, with their meaning (docs/reference/json.md is made from them; tests check
# the documents against them). A view never refreshed has only the fields up to `source_versions`.
DESCRIBE_VIEW_FIELDS = {
    "name": "the view's name",
    "kind": "view",
    "file": "the file that declares it, relative to the project",
    "line": "the line of its CREATE statement",
    "snapshot_path": "its snapshot table",
    "changelog_path": "its changelog table",
    "catalog_tables": "the names of its snapshot and changelog in Spark's catalog ([catalog] schema), once a "
    "refresh registered them; else []",
    "state_path": "the folder of its state tables",
    "key": "its unique key: a list of columns, [] for one row, null for a bag",
    "changelog": "append-only, upsert or retract",
    "strategy": "incremental or full",
    "reason": "why it is recomputed in full (null when incremental)",
    "inputs_declared": "the sources and views its SQL reads",
    "columns": "its columns: [{name, type, nullable}]",
    "expectations": "its declared expectations: [{name, on_violation, declared}]",
    "quarantine_path": "the table of the rows its QUARANTINE expectations refused",
    "quarantined_rows": "how many rows that table holds",
    "refreshed": "whether its snapshot exists",
    "version": "its snapshot's latest version (null: never refreshed)",
    "inputs": "input name -> the input version that snapshot version reflects",
    "source_versions": "source name -> the source version it reflects, through views over views",
    "mixed_source_versions": "only when its inputs reached different versions of one source: each source's "
    "versions (source_versions then gives the oldest)",
    "batch_id": "the batch that wrote its latest version",
    "generation": "its generation (a new one each time it is computed anew)",
    "row_count": "rows in its snapshot",
    "changelog_rows": "rows in its changelog",
    "sizes": "{snapshot_bytes, changelog_bytes, state_bytes}: bytes of its current files (state_bytes: every "
    "version on disk; null on an object store)",
    "state_rows": "rows of all its state tables",
    "state_ttl": "its state_ttl, or null",
    "rows_expired": "keys its state_ttl expired in this generation",
    "last_refresh": "when its latest version was committed, UTC",
    "late_rows": "rows set aside as too late (allowed_lateness)",
    "last_batch_expectations": "the last batch's expectation outcomes",
    "watermark": "its watermark after the last batch, UTC (event time only), or null",
    "stale_since": "commit time of the oldest source commit it does not reflect yet, or null when fresh",
    "freshness_lag_s": "seconds since then (0 when fresh)",
}
DESCRIBE_SOURCE_FIELDS = {
    "name": "the source's name",
    "kind": "source",
    "file": "the file that declares it",
    "line": "the line of its CREATE TABLE",
    "snapshot_path": "its Delta table",
    "path": "the same (an alias)",
    "changelog_path": "null (a source's changes are its Delta change data feed)",
    "table": "the table of Spark's catalog it reads (WITH ('table' = ...), or a view's FROM schema.table), or null",
    "key": "its PRIMARY KEY columns, or null",
    "append_only": "whether it was declared 'append_only'",
    "watermark": "its WATERMARK, as declared, or null",
    "idle_timeout_seconds": "its idle_timeout in seconds, or null",
    "strategy": "null",
    "reason": "null",
    "inputs": "null",
    "columns": "its declared columns: [{name, type, nullable}]",
    "expectations": "its declared expectations: [{name, on_violation, declared}]",
    "quarantine_path": "the table of the rows its QUARANTINE expectations refused",
    "quarantined_rows": "how many rows that table holds",
    "exists": "whether its table exists",
    "version": "its latest version (null when it does not exist)",
    "source_versions": "{its name: its latest version}",
    "row_count": "rows in its current files",
    "sizes": "{table_bytes}: bytes of its current files",
    "last_commit": "when its latest version was committed, UTC",
}


def describe(versions: Versions, name: str) -> dict[str, Any]:
    name = versions.name(name)
    if versions.is_view(name):
        return _describe_view(versions, name)
    return _describe_source(versions, name)


def history(versions: Versions, name: str) -> list[dict[str, Any]]:
    """One entry per version still in the log, oldest first: for a view, the batch that wrote it; for a
    source, the Delta operation."""
    name = versions.name(name)
    if not versions.is_view(name):
        ref = versions.table(name)
        versions.commits(name)  # the error for a missing table
        entries = sorted(commit_history(ref.open()), key=lambda h: h["version"])
        return [
            {
                "version": int(h["version"]),
                "committed": show_time(int(h["timestamp"])),
                "operation": h.get("operation"),
            }
            for h in entries
        ]
    commits = list(versions.snapshot_commits(name).values())
    return [
        {
            "version": c.version,
            "committed": show_time(c.timestamp_ms),
            "batch_id": c.batch_id,
            "kind": c.kind,
            "changes": c.changes,
            "inputs": c.inputs,
            # the first version of a new definition (its SQL, or what it reads, changed)
            "redefined": i > 0 and c.sql_hash != commits[i - 1].sql_hash,
            **lineage(versions.source_versions(name, c.version)),
            **({"expectations": c.expectations} if c.expectations else {}),
        }
        for i, c in enumerate(commits)
    ]


def lineage(reflects: dict[str, list[int]]) -> dict[str, Any]:
    """`source_versions`: the version of each source a view version reflects. When its inputs had reached
    different versions of one source, that source's oldest is given and `mixed_source_versions` lists all."""
    mixed = {s: v for s, v in reflects.items() if len(v) > 1}
    return {"source_versions": {s: v[0] for s, v in reflects.items()}} | (
        {"mixed_source_versions": mixed} if mixed else {}
    )


def _describe_view(versions: Versions, name: str) -> dict[str, Any]:
    plan = versions.catalog.plans[name]
    tables = view_tables(plan, versions.config.storage_options)
    info: dict[str, Any] = {
        "name": name,
        "kind": "view",
        "file": plan.view.file,
        "line": plan.view.line,
        "snapshot_path": tables.snapshot.uri,
        "changelog_path": tables.changelog.uri,
        "catalog_tables": registered_names(versions.config, tables),
        "state_path": tables.state,
        "key": None if plan.key is None else list(plan.key),
        "changelog": plan.changelog,
        "strategy": plan.strategy,
        "reason": plan.reason,
        "inputs_declared": list(plan.inputs),
        "columns": _columns(plan.columns),
        **_expectations(plan.view.expectations, tables.quarantine),
    }
    if not tables.snapshot.exists():
        return info | {"refreshed": False, "version": None, "inputs": None, "source_versions": None}
    latest = versions.snapshot_commit(name, versions.latest(name))
    reflects = versions.source_versions(name, latest.version)
    snapshot_rows, snapshot_bytes = table_size(tables.snapshot)
    changelog_rows, changelog_bytes = table_size(tables.changelog) if tables.changelog.exists() else (0, 0)
    stale = stale_since(versions, reflects)
    return info | {
        "refreshed": True,
        "version": latest.version,
        "batch_id": latest.batch_id,
        "generation": latest.generation,
        "inputs": latest.inputs,
        **lineage(reflects),
        "row_count": snapshot_rows,
        "changelog_rows": changelog_rows,
        "sizes": {
            "snapshot_bytes": snapshot_bytes,
            "changelog_bytes": changelog_bytes,
            "state_bytes": folder_bytes(tables.state),
        },
        "state_rows": state_rows(tables.state, versions.config.storage_options),
        "state_ttl": None if plan.view.state_ttl is None else duration(plan.view.state_ttl),
        "rows_expired": latest.expired or 0,
        "last_refresh": show_time(latest.timestamp_ms),
        "late_rows": table_size(tables.late)[0] if tables.late.exists() else 0,
        "last_batch_expectations": latest.expectations,
        "watermark": None
        if latest.watermark is None
        else show_time(EPOCH + timedelta(microseconds=latest.watermark)),
        "stale_since": None if stale is None else show_time(stale),
        "freshness_lag_s": 0.0 if stale is None else round(time.time() - stale / 1000, 3),
    }


def _describe_source(versions: Versions, name: str) -> dict[str, Any]:
    source = versions.catalog.sources[name]
    ref = versions.table(name)
    info: dict[str, Any] = {
        # DESIGN §5: `snapshot_path` (a source's table, as a view's snapshot), with `path` kept as its alias.
        "name": name,
        "kind": "source",
        "file": source.file,
        "line": source.line,
        "snapshot_path": ref.uri,
        "path": ref.uri,
        "changelog_path": None,
        "table": source.catalog_table,
        "key": None if source.key is None else list(source.key),
        "append_only": source.append_only,
        "watermark": source.watermark_sql(),
        "idle_timeout_seconds": source.idle_timeout_seconds(),
        "strategy": None,
        "reason": None,
        "inputs": None,
        "columns": [
            {"name": f.name, "type": type_name(t), "nullable": f.nullable}
            for f, t in zip(source.schema, source.sql_types)
        ],
        **_expectations(
            source.expectations,
            source_quarantine(versions.config.warehouse, name, versions.config.storage_options),
        ),
    }
    if not ref.exists():
        return info | {"exists": False, "version": None, "source_versions": None}
    rows, size = table_size(ref)
    last = versions.commits(name)[-1]
    return info | {
        "exists": True,
        "version": last.version,
        "source_versions": {name: last.version},
        "row_count": rows,
        "sizes": {"table_bytes": size},
        "last_commit": show_time(last.timestamp_ms),
    }


def _expectations(expectations, quarantine: TableRef) -> dict[str, Any]:
    """The declared expectations, and where the rows QUARANTINE refused are (and how many)."""
    return {
        "expectations": [
            {"name": e.name, "on_violation": e.on_violation, "declared": " ".join(e.text.split())}
            for e in expectations
        ],
        "quarantine_path": quarantine.uri,
        "quarantined_rows": table_size(quarantine)[0] if quarantine.exists() else 0,
    }


def _columns(fields) -> list[dict[str, Any]]:
    return [{"name": f.name, "type": type_name(f.type), "nullable": f.nullable} for f in fields]


def table_size(ref: TableRef) -> tuple[int | None, int]:
    """Rows (None when a file has no statistics) and bytes of the table's current files."""
    actions = pa.table(ref.open().get_add_actions(flatten=True)).to_pydict()
    records = actions.get("num_records", [])
    rows = None if any(r is None for r in records) else sum(records)
    return rows, sum(actions.get("size_bytes", []))


def stale_since(versions: Versions, reflects: dict[str, list[int]]) -> int | None:
    """Commit time (ms) of the oldest source commit the view does not reflect yet, through any path; None when
    it reflects the latest version of every source it depends on."""
    times = []
    for source, seen in reflects.items():
        missing = [c for c in versions.commits(source) if c.version > min(seen)]
        if missing:
            times.append(missing[0].timestamp_ms)
    return min(times) if times else None


def folder_bytes(path: str) -> int | None:
    """Bytes on disk under a local folder (every version of the state tables); None on object stores."""
    if not is_local(path):
        return None
    local = local_path(path)
    return sum(os.path.getsize(os.path.join(folder, f)) for folder, _, files in os.walk(local) for f in files)


def state_rows(state_folder: str, storage_options: dict[str, str]) -> int:
    """The rows of all the view's state tables, by their logs' row counts."""
    total = 0
    for name in list_folders(state_folder, storage_options):
        ref = TableRef(join_uri(state_folder, name), storage_options, name)
        if ref.exists():
            records = pa.table(ref.open().get_add_actions(flatten=True)).column("num_records")
            total += int(pc.sum(pc.fill_null(records, 0)).as_py() or 0)
    return total
