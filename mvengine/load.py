"""`mv load`: rows from a CSV, JSON lines or Parquet file into a source, converted to its declared columns, in
one Delta commit (delta-rs, no Spark).

Every value is converted by Arrow's cast from its text (CSV, JSON) or its Parquet type to the declared type, so
`12.50` becomes decimal(10,2) and `2026-11-25 12:00:00` a UTC microsecond timestamp (a time without an offset is
UTC, as everywhere in mvengine). A value that does not convert stops the load before anything is written, with
the file's line (or the Parquet row) and the column. A keyed source refuses a key twice in the file, and, when
appending, a key it already holds (`--upsert` replaces those rows instead: a MERGE by the key)."""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from mvengine.config import Config
from mvengine.errors import MvError
from mvengine.plan.types import type_name
from mvengine.project.catalog import Catalog
from mvengine.project.layout import source_table
from mvengine.sql.sources import SourceDef
from mvengine.storage.sources import ensure_source_table, require_declared_columns

FORMATS = ("csv", "json", "parquet")
EXTENSIONS = {".csv": "csv", ".json": "json", ".jsonl": "json", ".ndjson": "json", ".parquet": "parquet"}


@dataclass(frozen=True)
class Loaded:
    source: str
    version: int
    appended: int = 0
    inserted: int = 0
    updated: int = 0
    deleted: int = 0

    def line(self) -> str:
        done = [
            f"{n} rows {what}"
            for n, what in (
                (self.deleted, "deleted"),
                (self.appended, "appended"),
                (self.inserted, "inserted"),
                (self.updated, "updated"),
            )
            if n or what == "appended" and not (self.deleted or self.inserted or self.updated)
        ]
        return (
            f"{self.source}: {', '.join(done)} (version {self.version}); mv refresh applies it to the views"
        )


@dataclass(frozen=True)
class Rows:
    """A file's rows as text (CSV, JSON) or as Parquet typed them, and the line (or row) each came from."""

    table: pa.Table
    lines: list[int] | None  # None: row i is Parquet row i + 1
    name: str  # the file, as errors name it


def load(
    config: Config,
    catalog: Catalog,
    source: str,
    file: str | None,
    *,
    fmt: str | None = None,
    upsert: bool = False,
    delete_where: str | None = None,
) -> Loaded:
    source = catalog.require([source])[0]
    if source not in catalog.sources:
        raise MvError(
            f"{source} is a view: mv load writes into sources only",
            hint="load the source the view reads; mv refresh then updates the view",
        )
    declared = catalog.sources[source]
    if file is None and delete_where is None:
        raise MvError(
            "give a FILE to load (or - for standard input), or --delete-where",
            hint=f"e.g. mv load {source} rows.csv",
        )
    if (upsert or delete_where) and declared.append_only:
        raise MvError(
            f"source {source} is declared append-only ({declared.file}:{declared.line}): rows are only "
            "ever added to it, so --upsert and --delete-where do not apply",
            hint="append new rows (a correction is a new row, e.g. a negated amount), or declare the "
            "source without 'append_only'",
        )
    if upsert and not declared.key:
        raise MvError(
            f"--upsert merges by the PRIMARY KEY, and source {source} declares none "
            f"({declared.file}:{declared.line})",
            hint="load without --upsert to append, or declare a key",
        )
    rows = read_rows(file, fmt) if file is not None else None
    table = converted(rows, declared) if rows is not None else None
    if table is not None and rows is not None and declared.key:
        _refuse_repeated_keys(table, rows, declared)
    ref = source_table(declared, config.storage_options)
    ensure_source_table(
        ref,
        declared.schema,
        declared_at=f"{declared.file}:{declared.line}",
        path_declared=declared.path_declared,
    )
    require_declared_columns(ref, declared.schema, declared_at=f"{declared.file}:{declared.line}")
    if _needs_spark(ref.open()):
        return _load_with_spark(config, ref, declared, table, upsert=upsert, delete_where=delete_where)
    if table is not None and declared.key and not upsert:
        _refuse_known_keys(ref, table, declared)
    deleted = 0
    if delete_where is not None:
        deleted = _delete(ref, delete_where, source)
    if table is None:
        return Loaded(source, ref.open().version(), deleted=deleted)
    if upsert:
        keys = " AND ".join(f"t.`{k}` = s.`{k}`" for k in declared.key or ())
        metrics = (
            ref.open()
            .merge(table, keys, source_alias="s", target_alias="t")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )
        ref.committed()
        return Loaded(
            source,
            ref.open().version(),
            inserted=int(metrics.get("num_target_rows_inserted", 0)),
            updated=int(metrics.get("num_target_rows_updated", 0)),
            deleted=deleted,
        )
    from deltalake import write_deltalake

    write_deltalake(ref.uri, table, mode="append", storage_options=config.storage_options or None)
    ref.committed()
    return Loaded(source, ref.open().version(), appended=table.num_rows, deleted=deleted)


# -- reading a file ---------------------------------------------------------------------------------------------


def read_rows(file: str, fmt: str | None) -> Rows:
    name = "standard input" if file == "-" else file
    if fmt is None:
        if file == "-":
            raise MvError(
                "reading standard input needs --format (csv, json or parquet)",
                hint="e.g. cat rows.csv | mv load SOURCE - --format csv",
            )
        fmt = EXTENSIONS.get(os.path.splitext(file)[1].lower())
        if fmt is None:
            raise MvError(
                f"{file}: cannot tell the format from its extension",
                hint="name it .csv, .json/.jsonl or .parquet, or give --format",
            )
    try:
        with os.fdopen(os.dup(0), "rb") if file == "-" else open(file, "rb") as f:
            data = f.read()
    except OSError as e:
        raise MvError(f"{file}: {e.strerror}", hint="check the file's path") from None
    if fmt == "csv":
        return _csv(data, name)
    if fmt == "json":
        return _json_lines(data, name)
    import pyarrow.parquet as pq

    try:
        return Rows(pq.read_table(io.BytesIO(data)), None, name)
    except pa.ArrowException as e:
        raise MvError(
            f"{name}: not a Parquet file: {e}", hint="give --format when the extension is wrong"
        ) from None


def _csv(data: bytes, name: str) -> Rows:
    """Every column as text (converted later, against the declared types), with each row's line: a quoted
    value may hold line breaks, so lines are counted by a CSV reader when there are quotes."""
    import csv

    import pyarrow.csv as pcsv

    header = next(csv.reader(io.StringIO(data.decode("utf-8", errors="replace"))), None)
    if not header:
        raise MvError(
            f"{name}: empty, or no header line", hint="the first line names the columns, e.g. name,score"
        )
    try:
        table = pcsv.read_csv(
            io.BytesIO(data),
            convert_options=pcsv.ConvertOptions(
                column_types={n: pa.string() for n in header}, strings_can_be_null=False
            ),
        )
    except pa.ArrowInvalid as e:
        raise MvError(
            f"{name}: not a CSV file with a header line: {e}",
            hint="the first line names the columns; values are separated by commas",
        ) from None
    lines = list(range(2, table.num_rows + 2)) if b'"' not in data else _csv_lines(data, table.num_rows)
    return Rows(table, lines, name)


def _csv_lines(data: bytes, rows: int) -> list[int]:
    """The line each CSV row starts on, when quoted values may span lines."""
    import csv

    reader = csv.reader(io.StringIO(data.decode("utf-8", errors="replace")))
    next(reader, None)
    lines = []
    for _ in range(rows):
        lines.append(reader.line_num + 1)
        next(reader, None)
    return lines


def _json_lines(data: bytes, name: str) -> Rows:
    """One JSON object per line (blank lines skipped); numbers kept as their text, so that 12.50 converts to a
    decimal exactly."""
    columns: dict[str, list] = {}
    lines: list[int] = []
    for number, line in enumerate(data.decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line, parse_float=str, parse_int=str)
        except ValueError as e:
            raise MvError(
                f"{name}:{number}: not a JSON object: {e}",
                hint='JSON lines: one object per line, e.g. {"name": "ann", "score": 3}',
            ) from None
        if not isinstance(row, dict):
            raise MvError(
                f"{name}:{number}: a JSON {type(row).__name__}, not an object",
                hint='JSON lines: one object per line, e.g. {"name": "ann", "score": 3}',
            )
        for column, value in row.items():
            if isinstance(value, (dict, list)):
                raise MvError(
                    f"{name}:{number}: column {column}: a nested value, which no source column holds",
                    hint="flatten it into columns of their own",
                )
            text = (
                None
                if value is None
                else ("true" if value is True else "false" if value is False else str(value))
            )
            columns.setdefault(column, [None] * len(lines)).append(text)
        lines.append(number)
        for values in columns.values():
            values.extend([None] * (len(lines) - len(values)))
    table = pa.table({c: pa.array(v, pa.string()) for c, v in columns.items()}) if columns else pa.table({})
    return Rows(table, lines, name)


# -- converting to the declared columns -------------------------------------------------------------------------


def converted(rows: Rows, source: SourceDef) -> pa.Table:
    """The file's rows as the source's Arrow schema; errors name the file, line and column."""
    declared = {f.name.lower(): f for f in source.schema}
    unknown = [c for c in rows.table.column_names if c.lower() not in declared]
    if unknown:
        raise MvError(
            f"{rows.name}: column {unknown[0]} is not a column of source {source.name} "
            f"({source.file}:{source.line})",
            hint="its columns are " + ", ".join(f.name for f in source.schema) + "; rename or drop "
            "that column in the file",
        )
    given = {c.lower(): rows.table[c] for c in rows.table.column_names}
    arrays = []
    for field, sql_type in zip(source.schema, source.sql_types):
        column = given.get(field.name.lower())
        if column is None:
            if not field.nullable:
                raise MvError(
                    f"{rows.name}: column {field.name} is missing, and source {source.name} declares "
                    f"it NOT NULL ({source.file}:{source.line})",
                    hint="add the column to the file",
                )
            arrays.append(pa.nulls(rows.table.num_rows, field.type))
            continue
        arrays.append(_column(column.combine_chunks(), field, type_name(sql_type), rows, source))
    return pa.Table.from_arrays(arrays, schema=source.schema)


def _column(values: pa.Array, field: pa.Field, declared: str, rows: Rows, source: SourceDef) -> pa.Array:
    if pa.types.is_string(values.type) and not pa.types.is_string(field.type):
        values = pc.if_else(
            pc.equal(pc.utf8_trim_whitespace(values), ""), pa.scalar(None, pa.string()), values
        )
    try:
        out = _cast(values, field.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        bad = next(i for i in range(len(values)) if not _casts(values[i : i + 1], field.type))
        where = f"{rows.name}:{rows.lines[bad]}" if rows.lines is not None else f"{rows.name}: row {bad + 1}"
        raise MvError(
            f"{where}: column {field.name}: {values[bad].as_py()!r} is not a valid {declared}; nothing was "
            "written",
            hint=f"source {source.name} declares {field.name} {declared} "
            f"({source.file}:{source.line}); fix the value, or the declaration",
        ) from None
    if not field.nullable and out.null_count:
        bad = out.is_null().index(True).as_py()
        where = f"{rows.name}:{rows.lines[bad]}" if rows.lines is not None else f"{rows.name}: row {bad + 1}"
        raise MvError(
            f"{where}: column {field.name} is empty, and source {source.name} declares it NOT NULL; "
            "nothing was written",
            hint="give it a value",
        )
    return out


def _cast(values: pa.Array, target: pa.DataType) -> pa.Array:
    """Arrow's cast; a time without an offset, for a column with a zone, is read as UTC."""
    if not (pa.types.is_timestamp(target) and target.tz and pa.types.is_string(values.type)):
        return pc.cast(values, target)
    zoned = pc.match_substring_regex(values, r"(Z|[+-]\d{2}:?\d{2})$")
    with_zone = pc.cast(pc.if_else(zoned, values, pa.scalar(None, pa.string())), target)
    naive = pc.cast(pc.if_else(zoned, pa.scalar(None, pa.string()), values), pa.timestamp(target.unit))
    return pc.if_else(zoned, with_zone, pc.assume_timezone(naive, "UTC").cast(target))


def _casts(value: pa.Array, target: pa.DataType) -> bool:
    try:
        _cast(value, target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False
    return True


# -- writing --------------------------------------------------------------------------------------------------


def _refuse_repeated_keys(table: pa.Table, rows: Rows, source: SourceDef) -> None:
    """A key twice in the file breaks the source's PRIMARY KEY (appended), or makes the MERGE ambiguous."""
    seen: dict[tuple, int] = {}
    for i, row in enumerate(table.select(list(source.key or ())).to_pylist()):
        key = tuple(row.values())
        if key in seen:
            where = (
                f"lines {rows.lines[seen[key]]} and {rows.lines[i]}"
                if rows.lines is not None
                else f"rows {seen[key] + 1} and {i + 1}"
            )
            raise MvError(
                f"{rows.name}: key {_show_key(row)} is there twice ({where}); nothing was written",
                hint=f"source {source.name}'s PRIMARY KEY is ({', '.join(source.key or ())}): keep one row per key",
            )
        seen[key] = i


def _refuse_known_keys(ref, table: pa.Table, source: SourceDef) -> None:
    """Appending a key the source already holds would break its PRIMARY KEY."""
    keys = list(source.key or ())
    held = ref.open().to_pyarrow_table(columns=keys)
    if held.num_rows:
        found = table.select(keys).join(held, keys, join_type="inner")
        if found.num_rows:
            row = found.slice(0, 1).to_pylist()[0]
            raise MvError(
                f"{found.num_rows} rows of the file have a key source {source.name} already holds, e.g. "
                f"{_show_key(row)}; nothing was written",
                hint="mv load --upsert replaces the rows of known keys (a MERGE by the key)",
            )


# Table features delta-rs cannot write with (deletion vectors, column mapping): Spark's Delta connector can.
SPARK_FEATURES = {"deletionVectors", "columnMapping"}


def _needs_spark(dt) -> bool:
    protocol = dt.protocol()
    return (
        bool((set(protocol.reader_features or []) | set(protocol.writer_features or [])) & SPARK_FEATURES)
        or dt.metadata().configuration.get("delta.columnMapping.mode", "none") != "none"
    )


def _load_with_spark(
    config: Config, ref, source: SourceDef, table: pa.Table | None, *, upsert: bool, delete_where: str | None
) -> Loaded:
    """The same load by Spark's Delta connector, for a table with deletion vectors or column mapping (as
    Spark-written tables often have), which delta-rs cannot write: one commit per step, as with delta-rs."""
    from delta.tables import DeltaTable
    from pyspark.errors import PySparkException

    from mvengine.runtime.session import spark_session
    from mvengine.storage.objects import is_local

    if not is_local(ref.uri):
        raise MvError(
            f"{ref.label} has deletion vectors or column mapping, which only Spark's Delta connector "
            "writes, and it cannot reach an object store here; nothing was written",
            hint="load the rows with the writer that made the table, or rewrite the table without "
            "those features (REORG TABLE ... APPLY (PURGE), then disable them)",
        )
    spark = spark_session(config)
    delta = DeltaTable.forPath(spark, ref.uri)
    deleted = inserted = updated = appended = 0
    if table is not None and source.key and not upsert:
        keys = list(source.key)
        held = delta.toDF().select(*[f"`{k}`" for k in keys])
        found = spark.createDataFrame(table.select(keys)).join(held, keys, "inner")
        clash = found.limit(1).collect()
        if clash:
            raise MvError(
                f"rows of the file have a key source {source.name} already holds, e.g. "
                f"{_show_key(clash[0].asDict())}; nothing was written",
                hint="mv load --upsert replaces the rows of known keys (a MERGE by the key)",
            )
    if delete_where is not None:
        before = delta.toDF().count()
        try:
            delta.delete(delete_where)
        except PySparkException as e:
            raise MvError(
                f"--delete-where {delete_where!r} on source {source.name}: {str(e).splitlines()[0]}; "
                "nothing was written",
                hint="a SQL condition on the source's columns, e.g. \"country = 'XX'\"",
            ) from None
        deleted = before - delta.toDF().count()
    if table is not None:
        rows = spark.createDataFrame(table)
        if upsert:
            on = " AND ".join(f"t.`{k}` = s.`{k}`" for k in source.key or ())
            delta.alias("t").merge(
                rows.alias("s"), on
            ).whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
            metrics = delta.history(1).collect()[0]["operationMetrics"]
            inserted = int(metrics.get("numTargetRowsInserted", 0))
            updated = int(metrics.get("numTargetRowsUpdated", 0))
        else:
            rows.write.format("delta").mode("append").save(ref.uri)
            appended = table.num_rows
    ref.committed()
    return Loaded(
        source.name,
        ref.open().version(),
        appended=appended,
        inserted=inserted,
        updated=updated,
        deleted=deleted,
    )


def _show_key(row: dict) -> str:
    return ", ".join(f"{k} = {v!r}" for k, v in row.items())


def _delete(ref, predicate: str, source: str) -> int:
    try:
        metrics = ref.open().delete(predicate)
        ref.committed()
    except Exception as e:  # noqa: BLE001 (DataFusion's parse and plan errors are not all DeltaErrors)
        message = (str(e).splitlines() or [type(e).__name__])[0].split("error: ")[-1]  # the innermost cause
        raise MvError(
            f"--delete-where {predicate!r} on source {source}: {message}; nothing was written",
            hint="a SQL condition on the source's columns, e.g. \"country = 'XX'\"",
        ) from None
    return int(metrics.get("num_deleted_rows", 0))
