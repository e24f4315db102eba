"""Where a project's tables live and what a view's snapshot commits record (DESIGN.md §5). Nothing here
needs Spark: `mv describe` and `mv history` read these with delta-rs alone."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from mvengine.config import join_uri
from mvengine.errors import MvError
from mvengine.plan.view_plan import ViewPlan
from mvengine.sql.sources import SourceDef
from mvengine.storage.tables import TableRef, commit_history, commit_metadata


@dataclass(frozen=True)
class ViewTables:
    """Where a view's tables live."""

    root: str
    snapshot: TableRef
    changelog: TableRef
    state: str

    @property
    def late(self) -> TableRef:
        """The input rows later than the view's allowed lateness, not applied (runtime/event_time.py)."""
        return TableRef(
            join_uri(self.root, "late"), self.snapshot.storage_options, f"{self.snapshot.name}_late"
        )

    @property
    def quarantine(self) -> TableRef:
        """The view's rows its QUARANTINE expectations refused (runtime/expectations.py)."""
        return TableRef(
            join_uri(self.root, "quarantine"),
            self.snapshot.storage_options,
            f"{self.snapshot.name}_quarantine",
        )


def source_quarantine(warehouse: str, source: str, storage_options: dict[str, str]) -> TableRef:
    """A source's rows its QUARANTINE expectations refused: `<warehouse>/_quarantine/<source>` (the source's own
    table is the user's, and stays as written)."""
    return TableRef(join_uri(warehouse, "_quarantine", source), storage_options, f"{source}_quarantine")


def view_tables(plan: ViewPlan, storage_options: dict[str, str]) -> ViewTables:
    root = plan.view.path
    return ViewTables(
        root,
        TableRef(join_uri(root, "snapshot"), storage_options, plan.name),
        TableRef(join_uri(root, "changelog"), storage_options, f"{plan.name}_changelog"),
        join_uri(root, "_state"),
    )


def source_table(source: SourceDef, storage_options: dict[str, str]) -> TableRef:
    return TableRef(source.path, storage_options, source.name)


def app_id(view: str, generation: int) -> str:
    """The Delta application id under which a generation of a view commits its batches (DESIGN.md §4)."""
    return f"mvengine:{view}:g{generation}"


@dataclass(frozen=True)
class Committed:
    """What one commit of a view's snapshot records (its custom commit metadata)."""

    version: int
    timestamp_ms: int
    batch_id: int
    generation: int
    sql_hash: str
    kind: str  # bootstrap, stream or full
    inputs: dict[str, int]  # input name -> the input version this snapshot version reflects
    changes: int | None  # changelog rows of the batch (None: written before mvengine recorded it)
    input_ids: dict[str, str] = field(default_factory=dict)  # source -> its Delta table id (metaData.id)
    watermark: int | None = None  # the view's watermark after the batch, µs since the epoch (event time only)
    # The batch's expectation outcomes (runtime/expectations.py Outcome.to_json), of its sources and its own.
    expectations: list[dict[str, Any]] = field(default_factory=list)
    rows_in: int | None = None  # changes the batch read (None: a recomputation, or not recorded)
    batch_ms: int | None = None  # the batch's time up to this commit (None: not recorded)
    engine: str | None = None  # "driver" or "spark" (None: not recorded)

    @classmethod
    def from_info(cls, ref: TableRef, info: dict[str, Any]) -> Committed:
        """From one entry of the table's history (its commitInfo)."""
        if "mvengine.batch_id" not in info:
            raise MvError(
                f"{ref.label} was not written by mvengine (its commit {info.get('version')} has no "
                "mvengine.batch_id)",
                hint="move the table away, or give the view another 'path'",
            )
        changes = info.get("mvengine.changes")
        return cls(
            int(info["version"]),
            int(info["timestamp"]),
            int(info["mvengine.batch_id"]),
            int(info["mvengine.generation"]),
            info["mvengine.sql_hash"],
            info["mvengine.kind"],
            json.loads(info["mvengine.inputs"]),
            None if changes is None else int(changes),
            json.loads(info.get("mvengine.input_ids", "{}")),
            int(info["mvengine.watermark"]) if info.get("mvengine.watermark") else None,
            json.loads(info.get("mvengine.expectations", "[]")),
            _int_or_none(info.get("mvengine.rows_in")),
            _int_or_none(info.get("mvengine.batch_ms")),
            info.get("mvengine.engine"),
        )


def _int_or_none(value: str | None) -> int | None:
    return None if value is None else int(value)


def last_commit(ref: TableRef) -> Committed | None:
    """The latest commit of a view's snapshot, or None when the view was never refreshed."""
    if not ref.exists():
        return None
    dt = ref.open()
    return Committed.from_info(ref, commit_metadata(dt, dt.version()))


def snapshot_commits(ref: TableRef) -> list[Committed]:
    """Every commit of a view's snapshot still in its log, oldest first ([] when never refreshed)."""
    if not ref.exists():
        return []
    return sorted(
        (Committed.from_info(ref, info) for info in commit_history(ref.open())), key=lambda c: c.version
    )
