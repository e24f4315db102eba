"""Data files of a Delta table: written as Parquet on executors (with Delta statistics), and read back in
groups, one group per Spark partition.

Writers return `WrittenFile`s to the driver, which commits them all in one Delta transaction; nothing a
failed or duplicate task wrote is visible until then.
"""

from __future__ import annotations

import json
import math
import os
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from mvengine.storage.tables import TableRef

TARGET_FILE_ROWS = 1_000_000
STRING_STATS_PREFIX = 32  # as Delta: longer strings get no max statistic (a truncated max would be wrong)
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
STAGING_DIR = "_mvengine_staging"  # under a table's root; Delta ignores folders starting with '_'


@dataclass
class WrittenFile:
    """A Parquet file written into the table folder but not yet committed (a commit message)."""

    path: str
    size: int
    partition_values: dict[str, str | None]
    stats: str


def table_filesystem(ref: TableRef) -> tuple[pafs.FileSystem, str]:
    """A pyarrow filesystem for the table's storage and the table root within it."""
    if "://" not in ref.uri or ref.uri.startswith("file://"):
        root = ref.uri.removeprefix("file://")
        os.makedirs(root, exist_ok=True)
        return pafs.LocalFileSystem(), root
    from deltalake.fs import DeltaStorageHandler

    return pafs.PyFileSystem(DeltaStorageHandler(ref.uri, ref.storage_options or None)), ""


class _ColumnStats:
    """Running min/max/null count of one column over the batches of one file."""

    def __init__(self, field: pa.Field) -> None:
        self.type = field.type
        self.nulls = 0
        self.min: Any = None
        self.max: Any = None
        self.keep_min_max = _has_min_max(field.type)

    def update(self, column: pa.Array) -> None:
        self.nulls += column.null_count
        if not self.keep_min_max or column.null_count == len(column):
            return
        mm = pc.min_max(column)
        lo, hi = mm["min"].as_py(), mm["max"].as_py()
        self.min = lo if self.min is None else min(self.min, lo)
        self.max = hi if self.max is None else max(self.max, hi)


def _has_min_max(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_date(t) or pa.types.is_timestamp(t)


def _stat_value(value: Any, t: pa.DataType, upper: bool) -> Any:
    """A statistic in the JSON form of the Delta protocol; None when it cannot be represented safely."""
    if isinstance(value, str):
        if len(value) <= STRING_STATS_PREFIX:
            return value
        return None if upper else value[:STRING_STATS_PREFIX]
    if isinstance(value, datetime):
        # Delta stores timestamps with millisecond precision: round the bounds outwards.
        micros = value.microsecond
        if upper and micros % 1000:
            try:
                value = value.replace(microsecond=0) + timedelta(microseconds=math.ceil(micros / 1000) * 1000)
            except OverflowError:  # within a millisecond of datetime.max: no upper bound to give
                return None
        else:
            value = value.replace(microsecond=(micros // 1000) * 1000)
        text = value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}"
        return text + ("Z" if t.tz else "")
    if isinstance(value, date):
        return value.isoformat()
    return value


def _partition_string(value: Any) -> str | None:
    """A partition value as the Delta log writes it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        value = value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")
    if isinstance(value, (date, Decimal, int, float, str)):
        return str(value)
    raise TypeError(f"unsupported partition value {value!r}")


DUPLICATE_KEY = "mvengine: a key written twice"  # the text a writer's task fails with (see unique_rows)


def unique_rows(batches: Iterable[pa.RecordBatch], keys: list[str]) -> Iterator[pa.RecordBatch]:
    """`batches`, sorted by `keys`, passed on while no two neighbouring rows have equal keys (NULL equal to
    NULL); a ValueError starting with DUPLICATE_KEY, naming the key, at the first that does. What checks a
    key's uniqueness as a sorted write goes, instead of a shuffle of every key to count it (the keys are of
    types whose equality is Arrow's and Spark's alike: no floating point, where NaN and -0.0 differ)."""
    last: pa.RecordBatch | None = None
    for batch in batches:
        if batch.num_rows:
            rows = batch if last is None else pa.Table.from_batches([last, batch]).combine_chunks()
            same = None
            for k in keys:
                column = rows.column(k)
                before, after = column.slice(0, len(column) - 1), column.slice(1)
                equal = pc.or_(
                    pc.fill_null(pc.equal(before, after), False),
                    pc.and_(pc.is_null(before), pc.is_null(after)),
                )
                same = equal if same is None else pc.and_(same, equal)
            if same is not None and pc.any(same).as_py():
                at = pc.index(same, True).as_py()
                shown = ", ".join(f"{k}={rows.column(k)[at].as_py()!r}" for k in keys)
                raise ValueError(f"{DUPLICATE_KEY} ({shown})")
            last = batch.slice(batch.num_rows - 1)
        yield batch


class FileWriter:
    """Writes the batches of one Spark task as Parquet files of at most `target_rows` rows per partition."""

    def __init__(
        self,
        ref: TableRef,
        schema: pa.Schema,
        partition_by: list[str],
        *,
        prefix: str = "",
        target_rows: int = TARGET_FILE_ROWS,
    ) -> None:
        self.ref = ref
        self.partition_by = partition_by
        self.data_schema = pa.schema([f for f in schema if f.name not in partition_by])
        self.prefix = prefix
        self.target_rows = target_rows
        self.fs, self.root = table_filesystem(ref)
        self._open: dict[tuple[str | None, ...], _OpenFile] = {}
        self.written: list[WrittenFile] = []

    def write(self, batches: Iterable[pa.RecordBatch]) -> list[WrittenFile]:
        try:
            for batch in batches:
                if batch.num_rows:
                    for key, part in self._split(batch):
                        self._append(key, part)
        finally:
            for key in list(self._open):
                self._close(key)
        return self.written

    def _split(self, batch: pa.RecordBatch) -> Iterator[tuple[tuple[str | None, ...], pa.RecordBatch]]:
        if not self.partition_by:
            yield (), batch
            return
        table = pa.Table.from_batches([batch])
        combos = table.select(self.partition_by).group_by(self.partition_by, use_threads=False).aggregate([])
        for row in combos.to_pylist():
            mask = None
            for col, value in row.items():
                cond = (
                    pc.is_null(table[col])
                    if value is None
                    else pc.equal(table[col], pa.scalar(value, table[col].type))
                )
                mask = cond if mask is None else pc.and_(mask, cond)
            part = table.filter(mask).combine_chunks()
            for b in part.to_batches():
                yield tuple(_partition_string(row[c]) for c in self.partition_by), b

    def _append(self, key: tuple[str | None, ...], batch: pa.RecordBatch) -> None:
        handle = self._open.get(key) or self._start(key)
        data = pa.RecordBatch.from_arrays(
            [batch.column(f.name) for f in self.data_schema], schema=self.data_schema
        )
        handle.writer.write_batch(data)
        for f, stats in zip(self.data_schema, handle.stats):
            stats.update(data.column(f.name))
        handle.rows += data.num_rows
        if handle.rows >= self.target_rows:
            self._close(key)

    def _start(self, key: tuple[str | None, ...]) -> _OpenFile:
        folder = "/".join(
            f"{quote(c, safe='')}={quote(v if v is not None else NULL_PARTITION, safe='')}"
            for c, v in zip(self.partition_by, key)
        )
        name = f"{self.prefix}part-{uuid.uuid4()}.snappy.parquet"
        rel = f"{folder}/{name}" if folder else name
        full = f"{self.root}/{rel}" if self.root else rel
        if folder:
            self.fs.create_dir(full.rsplit("/", 1)[0], recursive=True)
        stream = self.fs.open_output_stream(full)
        writer = pq.ParquetWriter(
            stream,
            self.data_schema,
            compression="snappy",
            coerce_timestamps="us",
            use_compliant_nested_type=True,
        )
        handle = _OpenFile(
            rel,
            full,
            stream,
            writer,
            dict(zip(self.partition_by, key)),
            [_ColumnStats(f) for f in self.data_schema],
        )
        self._open[key] = handle
        return handle

    def _close(self, key: tuple[str | None, ...]) -> None:
        handle = self._open.pop(key)
        handle.writer.close()
        handle.stream.close()
        size = self.fs.get_file_info(handle.full_path).size
        self.written.append(
            WrittenFile(
                handle.rel_path,
                size,
                handle.partition_values,
                json.dumps(handle.delta_stats(self.data_schema)),
            )
        )


@dataclass
class _OpenFile:
    rel_path: str
    full_path: str
    stream: Any
    writer: pq.ParquetWriter
    partition_values: dict[str, str | None]
    stats: list[_ColumnStats]
    rows: int = 0

    def delta_stats(self, schema: pa.Schema) -> dict[str, Any]:
        mins: dict[str, Any] = {}
        maxs: dict[str, Any] = {}
        nulls: dict[str, int] = {}
        for f, s in zip(schema, self.stats):
            if pa.types.is_nested(f.type):
                continue
            nulls[f.name] = s.nulls
            if s.min is not None:
                lo, hi = _stat_value(s.min, f.type, upper=False), _stat_value(s.max, f.type, upper=True)
                if lo is not None and hi is not None:
                    mins[f.name], maxs[f.name] = lo, hi
        return {"numRecords": self.rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls}


def footer_stats(path: str, schema: pa.Schema) -> str:
    """The Delta statistics of a Parquet file another writer made (Spark's own), read off its footer: the row
    count, and per top-level column of `schema` its null count and, for the types FileWriter records them for
    and where every row group has them, its least and greatest value."""
    meta = pq.read_metadata(path)
    stats: dict[str, Any] = {"numRecords": meta.num_rows, "minValues": {}, "maxValues": {}, "nullCount": {}}
    leaves = {meta.schema.column(i).path: i for i in range(meta.num_columns)}
    for f in schema:
        at = leaves.get(f.name)
        if at is None or pa.types.is_nested(
            f.type
        ):  # (a nested column's leaves: no statistics, as FileWriter)
            continue
        found = [meta.row_group(g).column(at).statistics for g in range(meta.num_row_groups)]
        if any(s is None or not s.has_null_count for s in found):
            continue
        stats["nullCount"][f.name] = sum(s.null_count for s in found)
        ranged = [s for s in found if s.has_min_max]
        if not _has_min_max(f.type) or not ranged or len(ranged) + _all_null(found, meta) < len(found):
            continue
        lo = _stat_value(min(s.min for s in ranged), f.type, upper=False)
        hi = _stat_value(max(s.max for s in ranged), f.type, upper=True)
        if lo is not None and hi is not None:
            stats["minValues"][f.name], stats["maxValues"][f.name] = lo, hi
    return json.dumps(stats)


def _all_null(found: list[Any], meta: pq.FileMetaData) -> int:
    """The row groups whose column holds only NULLs (no range to record, none needed)."""
    return sum(
        1 for g, s in enumerate(found) if not s.has_min_max and s.null_count == meta.row_group(g).num_rows
    )


def delete_files(ref: TableRef, paths: list[str]) -> None:
    """Remove written-but-uncommitted files (a skipped duplicate or an aborted write)."""
    fs, root = table_filesystem(ref)
    for p in paths:
        try:
            fs.delete_file(f"{root}/{p}" if root else p)
        except FileNotFoundError:
            pass


@dataclass(frozen=True)
class FileGroup:
    """The files one Spark partition reads."""

    paths: tuple[str, ...] = ()


def group_files(sizes: dict[str, int], *, target_bytes: int, min_groups: int) -> list[FileGroup]:
    """Pack files into groups of about `target_bytes` (at least `min_groups` groups when there are enough
    files), biggest first onto the lightest group, so partitions are balanced."""
    if not sizes:
        return [FileGroup()]
    total = sum(sizes.values())
    n = min(len(sizes), max(min_groups, math.ceil(total / max(target_bytes, 1))))
    groups: list[list[str]] = [[] for _ in range(n)]
    loads = [0] * n
    for path, size in sorted(sizes.items(), key=lambda kv: (-kv[1], kv[0])):
        i = loads.index(min(loads))
        groups[i].append(path)
        loads[i] += size
    return [FileGroup(tuple(sorted(g))) for g in groups if g]


def group_dataset(dataset: pads.FileSystemDataset, paths: tuple[str, ...]) -> pads.FileSystemDataset:
    """The part of a delta-rs dataset made of the given files."""
    wanted = set(paths)
    fragments = [f for f in dataset.get_fragments() if f.path in wanted]
    return pads.FileSystemDataset(fragments, dataset.schema, dataset.format, dataset.filesystem)
