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
    """The source's table, read as its declared columns (a column another writer added is ignored)."""
    return TableRef(source.path, storage_options, source.name, columns=tuple(source.schema.names))


def app_id(view: str, generation: int) -> str:
    """The Delta application id under which a generation of a view commits its batches (DESIGN.md §4)."""
    return f"mvengine:{view}:g{generation}"


# The keys of a snapshot commit's custom metadata (DESIGN.md §5), written and read by CommitRecord only, each
# with its meaning (docs/reference/tables.md is made from it; every key is `mvengine.<key>`).
_PREFIX = "mvengine."
COMMIT_METADATA = {
    "inputs": "JSON: input name -> the input version this snapshot version reflects",
    "input_ids": "JSON: source name -> its Delta table id (metaData.id), so a replaced table is noticed",
    "batch_id": "the batch that wrote the version",
    "generation": "the view's generation: a new one each time the view is computed anew (new view, SQL changed, "
    "--full)",
    "sql_hash": "a hash of the view's SQL, to notice a changed definition",
    "kind": "bootstrap, stream (a delta rule) or full (a recomputation)",
    "changes": "changelog rows of the batch",
    "engine": "driver or spark: where the batch was computed",
    "rows_in": "changes the batch read (absent for a recomputation)",
    "watermark": "the view's watermark after the batch, µs since the epoch (event time only)",
    "batch_ms": "the batch's milliseconds up to this commit",
    "clock": "what NOW() read in the batch, µs since the epoch (temporal filters and state_ttl only)",
    "expired": "the keys its state_ttl expired in this generation, up to this batch (state_ttl only)",
    "expectations": "JSON: the batch's expectation outcomes, of its sources and its own (when it has any)",
}


@dataclass(frozen=True, kw_only=True)
class CommitRecord:
    """What one commit of a view's snapshot records (its custom commit metadata): written by the batch that
    commits it (`metadata()`), read back by the refresh, `mv status`, `mv history` and the UI (`from_info`)."""

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
    clock: int | None = None  # what NOW() read in the batch, µs since the epoch (temporal filters only)
    expired: int | None = None  # the keys its state_ttl expired in this generation, up to this batch
    version: int = -1  # the snapshot version that records it, and its commit time (-1: not committed yet)
    timestamp_ms: int = -1

    def metadata(self) -> dict[str, str]:
        """The commit's custom metadata: what `from_info` reads back."""
        written: dict[str, str] = {
            "inputs": json.dumps(self.inputs, sort_keys=True),
            "input_ids": json.dumps(self.input_ids, sort_keys=True),
            "batch_id": str(self.batch_id),
            "generation": str(self.generation),
            "sql_hash": self.sql_hash,
            "kind": self.kind,
        }
        optional: dict[str, int | str | None] = {
            "changes": self.changes,
            "engine": self.engine,
            "rows_in": self.rows_in,
            "watermark": self.watermark,
            "batch_ms": self.batch_ms,
            "clock": self.clock,
            "expired": self.expired,
        }
        written.update({k: str(v) for k, v in optional.items() if v is not None})
        if self.expectations:
            written["expectations"] = json.dumps(self.expectations)
        return {_PREFIX + k: v for k, v in written.items()}

    @classmethod
    def from_info(cls, ref: TableRef, info: dict[str, Any]) -> CommitRecord:
        """From one entry of the table's history (its commitInfo)."""
        if _PREFIX + "batch_id" not in info:
            raise MvError(
                f"{ref.label} was not written by mvengine (its commit {info.get('version')} has no "
                "mvengine.batch_id)",
                hint="move the table away, or give the view another 'path'",
            )
        recorded = {k.removeprefix(_PREFIX): v for k, v in info.items() if k.startswith(_PREFIX)}
        return cls(
            version=int(info["version"]),
            timestamp_ms=int(info["timestamp"]),
            batch_id=int(recorded["batch_id"]),
            generation=int(recorded["generation"]),
            sql_hash=recorded["sql_hash"],
            kind=recorded["kind"],
            inputs=json.loads(recorded["inputs"]),
            changes=_int_or_none(recorded.get("changes")),
            input_ids=json.loads(recorded.get("input_ids", "{}")),
            watermark=_int_or_none(recorded.get("watermark") or None),
            expectations=json.loads(recorded.get("expectations", "[]")),
            rows_in=_int_or_none(recorded.get("rows_in")),
            batch_ms=_int_or_none(recorded.get("batch_ms")),
            engine=recorded.get("engine"),
            clock=_int_or_none(recorded.get("clock")),
            expired=_int_or_none(recorded.get("expired")),
        )


def _int_or_none(value: str | None) -> int | None:
    return None if value is None else int(value)


def recorded_at(ref: TableRef, version: int) -> CommitRecord:
    """What the snapshot's commit `version` records."""
    return CommitRecord.from_info(ref, commit_metadata(ref.open(), version))


def last_commit(ref: TableRef) -> CommitRecord | None:
    """The latest commit of a view's snapshot, or None when the view was never refreshed."""
    if not ref.exists():
        return None
    dt = ref.open()
    return CommitRecord.from_info(ref, commit_metadata(dt, dt.version()))


def snapshot_commits(ref: TableRef) -> list[CommitRecord]:
    """Every commit of a view's snapshot still in its log, oldest first ([] when never refreshed)."""
    if not ref.exists():
        return []
    return sorted(
        (CommitRecord.from_info(ref, info) for info in commit_history(ref.open())), key=lambda c: c.version
    )
