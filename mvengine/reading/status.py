"""`mv status` and `mv ui`: every source and view at a glance, from the Delta logs and the pipeline's files
alone (delta-rs, no Spark), so it answers in about a second and can be redrawn live.

A view's row says how far behind it is (`behind`: commits of its sources it does not reflect yet, through any
path; `lag_s`: seconds since the oldest of them), what its last batch did (the snapshot commit records rows in
and out, milliseconds and where it ran), how big it is, and what stops it: the refresh holding the lock, the
view the last batch failed in, or a batch left half-done."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from mvengine.project.layout import view_tables
from mvengine.reading.describe import folder_bytes, stale_since, table_size
from mvengine.reading.versions import Versions, show_time
from mvengine.runtime.lock import lock_holder
from mvengine.runtime.pipeline_files import CutRecord, pipeline_folder
from mvengine.storage.sources import schema_drift

# The fields of one entry of `mv status --json` (a list, one per source and view), with their meaning
# (docs/reference/json.md is made from it; Status has exactly these).
STATUS_FIELDS = {
    "name": "the source's or view's name",
    "kind": "source or view",
    "strategy": "incremental or full (views; null for a source)",
    "version": "its latest Delta version; null when the table does not exist yet (a source) or was never "
    "refreshed (a view)",
    "behind": "source commits it does not reflect yet, through any path (views)",
    "lag_s": "seconds since the oldest of them (0 when fresh)",
    "last_time": "the last commit (a source) or the last batch's snapshot commit (a view), UTC",
    "age_s": "seconds since then",
    "rows_in": "the last batch's changes in (null: recomputed)",
    "rows_out": "its changelog rows",
    "batch_ms": "its milliseconds",
    "engine": "driver or spark: where it was computed",
    "rows": "rows in the table (the snapshot, for a view)",
    "state_bytes": "bytes of the view's state tables on disk (null on an object store)",
    "problem": "what stops it: failing, left unfinished, being refreshed (the lock holder), never refreshed; for a "
    "source, a declared column another writer dropped or retyped (the views over it stop)",
    "target_lag": "its target_lag (views): seconds, or 'downstream'; null without one",
    "behind_target": "whether its lag passed its target_lag (a duration; null without one)",
    "ignored_columns": "a source's columns that another writer added and its CREATE TABLE does not declare: no "
    "view reads them (null: none)",
    "reason": "why a view is refreshed in full",
}


@dataclass
class Status:
    name: str
    kind: str
    strategy: str | None = None
    version: int | None = None
    behind: int | None = None
    lag_s: float | None = None
    last_time: str | None = None
    age_s: float | None = None
    rows_in: int | None = None
    rows_out: int | None = None
    batch_ms: int | None = None
    engine: str | None = None
    rows: int | None = None
    state_bytes: int | None = None
    problem: str | None = None
    reason: str | None = None
    ignored_columns: list[str] | None = None
    target_lag: float | str | None = None
    behind_target: bool | None = None

    @property
    def stale(self) -> bool:
        return self.kind == "view" and (self.version is None or bool(self.behind))

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def status(versions: Versions) -> list[Status]:
    """One row per source, then one per view in DAG order."""
    trouble = _pipeline_trouble(versions)
    rows = [_source(versions, name) for name in versions.catalog.sources]
    rows += [_view(versions, name, trouble.get(name)) for name in versions.catalog.plans]
    return rows


def _source(versions: Versions, name: str) -> Status:
    ref = versions.table(name)
    if not ref.exists():
        return Status(
            name,
            "source",
            problem="the table does not exist yet (mv sources --create, or mv refresh, creates it)",
        )
    last = versions.commits(name)[-1]
    drift = schema_drift(ref, versions.catalog.sources[name].schema)
    return Status(
        name,
        "source",
        version=last.version,
        last_time=show_time(last.timestamp_ms),
        age_s=_age(last.timestamp_ms),
        rows=table_size(ref)[0],
        problem=f"{drift.problem()}: the views over it stop" if drift.breaks else None,
        ignored_columns=list(drift.added) or None,
    )


def _view(versions: Versions, name: str, problem: str | None) -> Status:
    plan = versions.catalog.plans[name]
    tables = view_tables(plan, versions.config.storage_options)
    reason = plan.reason if plan.strategy == "full" else None
    if not tables.snapshot.exists():
        return Status(name, "view", plan.strategy, problem=problem or "never refreshed", reason=reason)
    latest = versions.snapshot_commit(name, versions.latest(name))
    reflects = versions.source_versions(name, latest.version)
    behind = sum(
        sum(1 for c in versions.commits(source) if c.version > min(seen)) for source, seen in reflects.items()
    )
    since = stale_since(versions, reflects)
    lag = 0.0 if since is None else _age(since)
    target = plan.view.target_lag
    target_s = target / 1_000_000 if isinstance(target, int) else target
    behind_target = lag > target_s if isinstance(target_s, float) else None
    if behind_target:
        problem = problem or f"behind its target_lag ({lag:g} s, target {target_s:g} s)"
    return Status(
        name,
        "view",
        plan.strategy,
        latest.version,
        behind,
        lag,
        show_time(latest.timestamp_ms),
        _age(latest.timestamp_ms),
        latest.rows_in,
        latest.changes,
        latest.batch_ms,
        latest.engine,
        table_size(tables.snapshot)[0],
        folder_bytes(tables.state),
        problem,
        reason,
        target_lag=target_s,
        behind_target=behind_target,
    )


def _age(epoch_ms: int) -> float:
    return round(max(time.time() - epoch_ms / 1000, 0.0), 1)


def _pipeline_trouble(versions: Versions) -> dict[str, str]:
    """View -> what the pipeline's files say about it: being refreshed (by whom), the view the last batch
    failed in (and the error), or a batch left half-done."""
    folder = pipeline_folder(versions.config.warehouse)
    trouble: dict[str, str] = {}
    options = versions.config.storage_options
    holder = lock_holder(folder, options)
    if holder is not None:
        names = holder.get("views") or list(versions.catalog.plans)
        for name in names:
            trouble[name] = f"being refreshed by process {holder['pid']} since {holder.get('since', '?')}"
    cuts = CutRecord(folder, options)
    failure = cuts.failure()
    if failure is not None and failure[0] in versions.catalog.plans:
        view, error = failure
        trouble[view] = f"last batch failed: {error}" if error else "last batch failed"
    elif cuts.pending() is not None and holder is None:
        for name in versions.catalog.plans:
            trouble.setdefault(name, "a batch was left half-done: the next mv refresh finishes it")
    return trouble
