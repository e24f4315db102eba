"""Opening, creating and checking Delta tables with delta-rs; every failure becomes a StorageError that names
the table and its path (with secrets redacted)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, Schema
from deltalake.exceptions import TableNotFoundError

from mvengine.config import redact_text
from mvengine.errors import CdfDisabledError, StorageError, UnsupportedError
from mvengine.storage.objects import STORE_HINT, is_local, store_error

CDF_PROPERTY = "delta.enableChangeDataFeed"
# What every table mvengine creates has: the change data feed (downstream views read it), and a checkpoint every
# ten commits, as Spark's writer makes them (delta-rs's default is a hundred): opening a table at a version
# replays the log since the checkpoint before it, which a batch does for each input it reads as of before.
TABLE_PROPERTIES = {CDF_PROPERTY: "true", "delta.checkpointInterval": "10"}
# Reader features that the pyarrow-dataset read path of delta-rs cannot apply.
UNSUPPORTED_READER_FEATURES = {"deletionVectors", "columnMapping"}
# Reader features that leave a table's rows exactly the rows of its data files, as a Parquet reader sees them.
# (A VARIANT column is a struct of two binaries in the files: no source declares one, and reads take the declared
# columns only, so a table Spark wrote with one is read like any other.)
PLAIN_READER_FEATURES = {
    "timestampNtz",
    "v2Checkpoint",
    "vacuumProtocolCheck",
    "variantType",
    "variantType-preview",
}


@dataclass(frozen=True)
class TableRef:
    """Where a table lives; small and picklable, so it travels to executors in read/write plans."""

    uri: str
    storage_options: dict[str, str] = field(default_factory=dict)
    name: str | None = None
    # The columns every read of the table takes (a source's declared columns): a column another writer added
    # since is not read, so no view sees it (None: all the table's columns).
    columns: tuple[str, ...] | None = None

    @property
    def label(self) -> str:
        return f"table {self.name!r} at {self.uri}" if self.name else f"table at {self.uri}"

    def redact(self, text: str) -> str:
        """`text` with every secret storage-option value replaced by '***'."""
        return redact_text(text, self.storage_options)

    def exists(self) -> bool:
        if _LOOKED is not None and self._key() in _LOOKED:
            return True
        local = self.uri.removeprefix("file://")
        if "://" not in local and os.path.exists(local) and not os.path.isdir(local):
            raise StorageError(
                f"{self.label}: its path is a file, not a Delta table's folder",
                hint="point its 'path' at a Delta table's folder (or at a missing one)",
            )
        try:
            return DeltaTable.is_deltatable(self.uri, self.storage_options or None)
        except (
            OSError
        ) as e:  # an object store that cannot be reached, or refuses: say why, not "Generic S3 error"
            raise StorageError(
                f"cannot reach {self.label}: {self.redact(store_error(str(e)))}", hint=STORE_HINT
            ) from None

    def open(self, *, version: int | None = None, timestamp: str | datetime | None = None) -> DeltaTable:
        """The table at its latest version, at `version`, or as of `timestamp` (latest commit at or before).

        The latest version is kept open per process and brought up to date by reading only the log entries
        added since (opening a table reads its whole log: ~15 ms after a few dozen commits, paid by every
        small commit several times); callers must not move it to another version (`load_as_version`)."""
        latest = self._latest()
        if version is not None:
            if not 0 <= version <= latest.version():
                raise StorageError(
                    f"{self.label} has no version {version}; versions are 0..{latest.version()}"
                )
            if version == latest.version():
                return latest
            dt = self._at(int(version))
        elif timestamp is not None:
            dt = self._load()
            when = parse_timestamp(timestamp)
            try:
                entries = commit_history(
                    dt
                )  # read before time travel: history() of an older version mislabels
                dt.load_as_version(when)
                committed_ms = next(h["timestamp"] for h in entries if h.get("version") == dt.version())
            except Exception as e:
                committed_ms, reason = None, self.redact(str(e))
            else:
                reason = "it is before the table's first commit"
            if committed_ms is None or committed_ms > when.timestamp() * 1000:
                raise StorageError(
                    f"{self.label} has no version as of {when.isoformat()}: {reason}",
                    hint="use a timestamp at or after the table's first commit",
                )
        else:
            dt = latest
        return dt

    def _latest(self) -> DeltaTable:
        key = self._key()
        dt = _OPEN.get(key)
        if dt is not None and _LOOKED is not None and key in _LOOKED:
            return dt
        if dt is not None:
            # (by the version it was read to: a MERGE through it moves it to the version it commits)
            version, entry = _ENTRY.get(key, (-1, None))
            try:
                if version < 0 or _log_entry(self.uri, version) != entry:
                    dt = None  # the table went away, or was made anew: open it anew
                else:
                    dt.update_incremental()
            except Exception:
                dt = None
        if dt is None:
            dt = _OPEN[key] = self._load()
        _ENTRY[key] = (dt.version(), _log_entry(self.uri, dt.version()))
        if _LOOKED is not None:
            _LOOKED.add(key)
        return dt

    def _at(self, version: int) -> DeltaTable:
        """The table at an earlier version, loaded once per process (a batch reads its inputs as they were
        before it several times; loading replays the log since the last checkpoint, ~15 ms after a few dozen
        commits) and again when the table was made anew."""
        key, entry = (*self._key(), version), _log_entry(self.uri, version)
        found = _AT.pop(key, None)
        if found is None or found[1] != entry:
            found = (self._load(version), entry)
        _AT[key] = found  # (the most recent last)
        for oldest in list(_AT)[:-16]:  # (a copy: a view's commits open tables on a thread too)
            _AT.pop(oldest, None)
        return found[0]

    def committed(self) -> None:
        """This process committed to the table: its log is read again at the next open."""
        if _LOOKED is not None:
            _LOOKED.discard(self._key())

    def forget(self) -> None:
        """Drop the open latest version (the table's folder is being removed)."""
        self.committed()
        _OPEN.pop(self._key(), None)

    def _key(self) -> tuple:
        return self.uri, tuple(sorted(self.storage_options.items()))

    def _load(self, version: int | None = None) -> DeltaTable:
        try:
            return DeltaTable(self.uri, version=version, storage_options=self.storage_options or None)
        except TableNotFoundError:
            raise StorageError(
                f"no Delta table at {self.uri}" + (f" (for {self.name!r})" if self.name else ""),
                hint="check the path, or create the table first",
            ) from None
        except Exception as e:  # delta-rs raises plain OSError/DeltaError for I/O problems and damaged logs
            raise StorageError(
                f"cannot open {self.label}: {self.redact(first_line(str(e)))}",
                hint=f"delta-rs cannot read its log ({self.uri}/_delta_log): when a file there is "
                "damaged (cut short by a full disk, or written by hand), restore it from a "
                "backup; mvengine wrote nothing",
            ) from None


_OPEN: dict[tuple[str, tuple], DeltaTable] = {}  # see TableRef.open
_AT: dict[tuple, tuple[DeltaTable, tuple[int, int] | None]] = {}  # see TableRef._at
# the version each open table was read to, and its log entry
_ENTRY: dict[tuple[str, tuple], tuple[int, tuple[int, int] | None]] = {}
_LOOKED: set[tuple[str, tuple]] | None = None  # see logs_read_once


@contextmanager
def logs_read_once() -> Iterator[None]:
    """Inside, each table's log is read at most once (and again after this process commits to it), instead of
    at every open: for a pipeline batch, during which this process is the only writer of the views' tables and
    reads the sources at a cut taken before. Nested scopes share the outer one's reads."""
    global _LOOKED
    if _LOOKED is not None:
        yield
        return
    _LOOKED = set()
    try:
        yield
    finally:
        _LOOKED = None


def _log_entry(uri: str, version: int) -> tuple[int, int] | None:
    """What identifies a local table's log entry for `version` (its file's inode and change time): another
    value means the folder was removed and a table made anew there (None for tables elsewhere)."""
    if "://" in uri and not uri.startswith("file://"):
        return None
    try:
        stat = os.stat(os.path.join(uri.removeprefix("file://"), "_delta_log", f"{version:020d}.json"))
    except OSError:
        return (-1, -1)
    return stat.st_ino, stat.st_ctime_ns


def first_line(message: str) -> str:
    """A delta-rs error's first line (the lines after it are a Rust backtrace)."""
    return next((line.strip() for line in message.splitlines() if line.strip()), message)


def parse_timestamp(value: str | datetime) -> datetime:
    """A timestamp given as text ('2026-11-21 12:03:00', ISO 8601) or datetime; naive means UTC."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise StorageError(
                f"invalid timestamp {value!r}",
                hint="write it as 'YYYY-MM-DD HH:MM:SS[.ffffff][+HH:MM]' (UTC when no offset)",
            ) from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def create_table(ref: TableRef, schema: pa.Schema, *, partition_by: list[str] | None = None) -> DeltaTable:
    """Create an empty table with the change data feed on (downstream views read it)."""
    ref.committed()
    try:
        return DeltaTable.create(
            ref.uri,
            Schema.from_arrow(schema),
            mode="error",
            partition_by=partition_by,
            name=ref.name,
            configuration=TABLE_PROPERTIES,
            storage_options=ref.storage_options or None,
        )
    except Exception as e:
        raise StorageError(f"cannot create {ref.label}: {ref.redact(str(e))}") from None


def require_cdf(ref: TableRef, dt: DeltaTable) -> None:
    """Raise CdfDisabledError, with the one-line fix, unless the table records its change data feed."""
    if dt.metadata().configuration.get(CDF_PROPERTY, "false").lower() != "true":
        raise CdfDisabledError(
            f"{ref.label} does not have the change data feed enabled, which mvengine needs to read its changes",
            hint=(
                'enable it (changes from then on are recorded): python -c "from deltalake import DeltaTable; '
                f"DeltaTable('{ref.uri}').alter.set_table_properties({{'{CDF_PROPERTY}': 'true'}})\"  "
                f"-- or in Spark SQL: ALTER TABLE delta.`{ref.uri}` SET TBLPROPERTIES ({CDF_PROPERTY} = true)"
            ),
        )


def require_readable(ref: TableRef, dt: DeltaTable) -> None:
    features = set(dt.protocol().reader_features or [])
    if features & UNSUPPORTED_READER_FEATURES:
        raise UnsupportedError(
            f"{ref.label} uses Delta reader features {sorted(features & UNSUPPORTED_READER_FEATURES)}, "
            "which mvengine's reader does not support yet",
            hint="rewrite the table without them (e.g. REORG TABLE ... APPLY (PURGE) and disable the feature)",
        )


def in_plain_files(dt: DeltaTable) -> bool:
    """Whether the table's rows at this version are the rows of its data files, column for column: no
    deletion vectors, no column mapping, no partition values kept outside the files, no widened types."""
    protocol, metadata = dt.protocol(), dt.metadata()
    return (
        (
            protocol.min_reader_version == 1
            or (
                protocol.min_reader_version == 3
                and set(protocol.reader_features or []) <= PLAIN_READER_FEATURES
            )
        )
        and metadata.configuration.get("delta.columnMapping.mode", "none") == "none"
        and not metadata.partition_columns
    )


def read_by_driver(ref: TableRef, dt: DeltaTable) -> bool:
    """Whether the table's rows are read on the driver: its files' rows (`in_plain_files`), or those rows less
    its deletion vectors, with the values of its partition columns and its columns mapped from the files' names,
    which delta-rs's scan applies, adds and maps. Its change data feed reads the `_change_data` files Spark's
    deletes, updates and merges write beside them: delta-rs's, or delta-kernel-rs's for a table with column
    mapping, which delta-rs does not read yet (change_reader.py; on a local path)."""
    protocol = dt.protocol()
    return (
        protocol.min_reader_version in (1, 2, 3)
        and set(protocol.reader_features or [])
        <= PLAIN_READER_FEATURES | {"deletionVectors", "columnMapping"}
        and (not has_column_mapping(dt) or is_local(ref.uri))
    )


def why_not_read_by_driver(ref: TableRef, dt: DeltaTable) -> str:
    """Why `read_by_driver` is false for the table, in words."""
    protocol = dt.protocol()
    unknown = (
        set(protocol.reader_features or []) - PLAIN_READER_FEATURES - {"deletionVectors", "columnMapping"}
    )
    if protocol.min_reader_version not in (1, 2, 3) or unknown:
        features = ", ".join(sorted(unknown)) or f"reader version {protocol.min_reader_version}"
        return f"{ref.label} needs a Delta reader with {features}, which the driver's reader does not have"
    return f"{ref.label} has column mapping and is not on a local path"


def has_column_mapping(dt: DeltaTable) -> bool:
    """Whether the table's files name its columns otherwise than the table does (column mapping by name or id)."""
    return dt.metadata().configuration.get("delta.columnMapping.mode", "none") != "none"


def require_version_range(ref: TableRef, dt: DeltaTable, first: int, last: int) -> None:
    if not 0 <= first <= last <= dt.version():
        raise StorageError(
            f"invalid change range {first}..{last} for {ref.label}: versions are "
            f"0..{dt.version()} and the start must not be after the end"
        )


def require_columns(ref: TableRef, have: list[str], wanted: list[str]) -> None:
    missing = [c for c in wanted if c not in have]
    if missing:
        raise StorageError(f"{ref.label} has no column(s) {missing}; its columns are {have}")


def is_committed(ref: TableRef, app_id: str, version: int) -> bool:
    """Whether a commit with application transaction (app_id, >= version) is in the table.

    delta-rs records `txn` actions but does not skip duplicates itself; writers ask this first.
    """
    if not ref.exists():
        return False
    latest = _app_version(ref, ref.open(), app_id)
    return latest is not None and latest >= version


def version_before(ref: TableRef, app_id: str, version: int) -> int:
    """The table's version before application transaction (app_id, version) committed to it.

    A writer commits at most once per transaction version, and versions come in order: when the latest commit
    is that transaction's (a batch being replayed after a crash), the answer is the version before it.
    """
    dt = ref.open()
    committed = _app_version(ref, dt, app_id)
    return dt.version() - 1 if committed is not None and committed >= version else dt.version()


def _app_version(ref: TableRef, dt: DeltaTable, app_id: str) -> int | None:
    """`dt.transaction_version(app_id)`, asked of delta-rs once per table version in a process: it costs
    ~1.5 ms, and several steps of every batch ask it of the same state tables."""
    key = (ref._key(), str(dt.metadata().id), dt.version(), app_id)
    if key not in _APP_VERSIONS:
        if len(_APP_VERSIONS) >= 4096:
            _APP_VERSIONS.clear()
        _APP_VERSIONS[key] = dt.transaction_version(app_id)
    return _APP_VERSIONS[key]


_APP_VERSIONS: dict[tuple, int | None] = {}  # (table, its id, version, application) -> its transaction


def commit_history(dt: DeltaTable, since: int | None = None) -> list[dict[str, Any]]:
    """The table's commitInfos from version `since` (default: the first) to its newest, newest first, each with
    its `version`. `dt` is moved to the newest version.

    delta-rs numbers the entries down from the version `dt` was loaded at, but reads the log as it is when
    called: a commit landing in between shifts every label by one (a view refreshing while it is described).
    So the log is read again, as far back as `since` from the newest version, until no commit landed while it
    was read.
    """
    for _ in range(HISTORY_ATTEMPTS):
        loaded = dt.version()
        entries = dt.history(None if since is None else max(loaded - since + 1, 1))
        dt.update_incremental()
        if dt.version() == loaded:
            return entries
    raise StorageError(
        f"the log of {dt.table_uri} kept changing while it was read ({HISTORY_ATTEMPTS} times)",
        hint="try again",
    )


HISTORY_ATTEMPTS = 20


def commit_metadata(dt: DeltaTable, version: int) -> dict[str, Any]:
    """The commitInfo of one version (operation, timestamp and any custom metadata such as mvengine.*).

    `dt` must be loaded at its latest version: delta-rs mislabels the history of a time-travelled table.
    """
    for entry in commit_history(dt, since=version):
        if entry.get("version") == version:
            return entry
    raise StorageError(
        f"version {version} of table at {dt.table_uri} is not in its history "
        "(it may have been cleaned up by log retention)"
    )


def table_rows(ref: TableRef, version: int) -> int:
    """The table's rows at `version`, from the row counts its log records per file (no data read)."""
    import pyarrow.compute as pc

    dt = ref.open(version=version)
    counts = pa.table(dt.get_add_actions(flatten=True)).column("num_records")
    return int(pc.sum(counts).as_py() or 0)


def arrow_dataset(
    dt: DeltaTable,
    *,
    schema: pa.Schema | None = None,
    filesystem: Any = None,
    file_pruning_predicate: list[tuple] | None = None,
) -> Any:
    """delta-rs's pyarrow dataset of the table at its version, with fragments that promise only their
    partition values.

    delta-rs also makes each file's min/max statistics part of its fragment's guarantee, and writes `c >= null`
    where a statistic is missing (booleans and decimals in files some writers make, columns past the first 32):
    Arrow then proves any filter on `c` false for the whole file and drops rows that match it (a group's state
    not found on the driver, issue 44). Timestamps' statistics may be truncated to milliseconds, too. Without
    those guarantees, files are still skipped by `file_pruning_predicate` (delta-rs) and row groups by their
    Parquet statistics (Arrow)."""
    from urllib.parse import unquote

    import pyarrow.dataset as pads

    dataset = dt.to_pyarrow_dataset(
        schema=schema, filesystem=filesystem, file_pruning_predicate=file_pruning_predicate
    )
    partition_columns = dt.metadata().partition_columns
    promises: dict[str, Any] = {}
    if partition_columns:
        actions = pa.table(dt.get_add_actions(flatten=True))
        for i, path in enumerate(actions.column("path").to_pylist()):
            promise = None
            for c in partition_columns:
                value = actions.column(f"partition.{c}")[i]
                field = pads.field(c)
                equal = (
                    field.is_null()
                    if not value.is_valid
                    else field == value.cast(dataset.schema.field(c).type)
                )
                promise = equal if promise is None else promise & equal
            promises[unquote(unquote(path))] = promise
    fragments = []
    for fragment in dataset.get_fragments():
        key = unquote(fragment.path)
        if partition_columns and key not in promises:
            raise StorageError(
                f"table at {dt.table_uri}: file {fragment.path} is not among its files' partition values"
            )
        fragments.append(
            dataset.format.make_fragment(
                fragment.path, filesystem=dataset.filesystem, partition_expression=promises.get(key)
            )
        )
    return pads.FileSystemDataset(fragments, dataset.schema, dataset.format, dataset.filesystem)
