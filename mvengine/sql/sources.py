"""Source tables declared in SQL (DESIGN.md §3):

CREATE TABLE user_scores (name STRING, ..., PRIMARY KEY (name) NOT ENFORCED,
                          WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
WITH ('path' = 'warehouse/sources/user_scores', 'append_only' = 'false', 'idle_timeout' = '1 minute');
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa
from sqlglot import exp

from mvengine.config import Config, join_uri
from mvengine.errors import InvalidNameError, SqlError
from mvengine.names import did_you_mean, validate_name
from mvengine.sql.expectations import Expectation, check_columns
from mvengine.sql.files import Statement, Watermark
from mvengine.sql.time_syntax import option_micros, unit_micros
from mvengine.sql.types import arrow_type

# A source's WITH options, with their meaning (docs/reference/sql.md is made from it).
SOURCE_OPTIONS = {
    "path": "the Delta table: a folder inside the project, an absolute path or a URI; default "
    "<warehouse>/sources/<source>",
    "append_only": "'true': its commits only ever add rows, so views over it keep less state (a commit that "
    "deletes or updates stops the refresh with an error); default 'false'",
    "table": "a Delta table of Spark's catalog, by name ('sales.orders'), instead of a 'path': the CREATE TABLE "
    "adds what the catalog does not know (a key, a watermark, expectations), and may leave out the columns "
    "(then the table's own, as they are when a command reads them)",
    "idle_timeout": "with a WATERMARK (an interval such as '1 minute'): a source whose newest commit is older "
    "than this when a batch runs is idle, and no longer holds back the watermark of the views that read it",
}


# `locate(name, where, columns=...)`: where the catalog's table `name` is, and with `columns` its columns now (a
# schema and the SQL type of each column); a SqlError located at `where` when the catalog has no Delta table by
# that name.
class LocateTable(Protocol):
    def __call__(
        self, name: str, where: dict[str, Any], *, columns: bool
    ) -> tuple[str, tuple[pa.Schema, tuple[exp.DataType, ...]] | None]: ...


@dataclass(frozen=True)
class SourceDef:
    name: str
    file: str
    line: int
    schema: pa.Schema
    sql_types: tuple[exp.DataType, ...]  # the declared type of each column of `schema`, for planning
    path: str
    key: tuple[str, ...] | None
    append_only: bool
    watermark: Watermark | None
    expectations: tuple[Expectation, ...] = ()  # CONSTRAINT ... EXPECT (sql/expectations.py)
    # WITH ('path' = ...): the table is the user's, found there, never created by a refresh (a typo in the path
    # would otherwise give views over a new empty table); without it, the project's own under the warehouse.
    path_declared: bool = False
    # WITH ('table' = 'sales.orders'): the catalog's table it reads (lower case; project/catalog_tables.py
    # locates it, and `path` is its location); also set for a catalog table a view reads with no CREATE TABLE.
    catalog_table: str | None = None
    # WITH ('idle_timeout' = '1 minute'), µs: with no commit for that long, the source stops holding back the
    # watermarks of the views that read it (runtime/event_time.py)
    idle_timeout: int | None = None

    def watermark_sql(self) -> str | None:
        """`ts AS ts - INTERVAL '5' SECOND`, as `mv plan`, `mv sources` and `mv describe` show it."""
        return f"{self.watermark.column} AS {self.watermark.expression}" if self.watermark else None

    def idle_timeout_seconds(self) -> float | None:
        return None if self.idle_timeout is None else self.idle_timeout / 1_000_000

    def watermark_shown(self) -> str:
        """The watermark as `mv plan` shows it, with its idle timeout ('' without a watermark)."""
        idle = self.idle_timeout_seconds()
        return f"{self.watermark_sql() or ''}{'' if idle is None else f' (idle after {idle:g} s)'}"


def is_source(statement: Statement) -> bool:
    tree = statement.tree
    return isinstance(tree, exp.Create) and tree.kind == "TABLE"


def parse_source(statement: Statement, config: Config, locate: LocateTable | None = None) -> SourceDef:
    """The source a CREATE TABLE declares. One WITH ('table' = 'schema.table') is located in Spark's catalog by
    `locate` (project/catalog_tables.py), which gives the table's location and, when the statement lists no
    columns, its columns."""
    tree = statement.tree
    assert isinstance(tree, exp.Create)
    elements = tree.this.expressions if isinstance(tree.this, exp.Schema) else []
    name = tree.this.this.name if isinstance(tree.this, exp.Schema) else tree.this.name
    where: dict[str, Any] = {"file": statement.file, "line": statement.line, "obj": f"source {name}"}
    if statement.emit is not None:
        raise SqlError(
            "EMIT belongs after a materialized view's SELECT, not on a source",
            file=statement.file,
            line=statement.emit.line,
            col=statement.emit.col,
            obj=f"source {name}",
            hint="move the EMIT clause to the view that reads this source",
        )
    try:
        validate_name(name, "source name")
    except InvalidNameError as e:
        raise SqlError(e.message, **where, hint=e.hint) from None
    fields: list[pa.Field] = []
    sql_types: list[exp.DataType] = []
    key: tuple[str, ...] | None = None
    options = _options(tree, where)
    unknown = options.keys() - SOURCE_OPTIONS.keys()
    if unknown:
        raise SqlError(
            f"unknown WITH option(s) {sorted(unknown)}",
            **where,
            hint=f"known options: {', '.join(sorted(SOURCE_OPTIONS))}",
        )
    catalog_table = _catalog_table(options, where)
    for item in elements:
        if isinstance(item, exp.ColumnDef):
            t = arrow_type(item.args["kind"]) if item.args.get("kind") else None
            if t is None:
                raise SqlError(
                    f"column {item.name!r} has unsupported type {item.args.get('kind')}",
                    **where,
                    hint="use STRING, INT, BIGINT, DOUBLE, DECIMAL(p,s), BOOLEAN, DATE, TIMESTAMP, "
                    "BINARY, ARRAY<...>, MAP<...> or STRUCT<...>",
                )
            not_null = any(
                isinstance(c.args.get("kind"), exp.NotNullColumnConstraint)
                for c in item.args.get("constraints") or []
            )
            if item.name.lower() in (f.name.lower() for f in fields):
                raise SqlError(f"column {item.name!r} is declared twice", **where)
            fields.append(pa.field(item.name, t, nullable=not not_null))
            sql_types.append(item.args["kind"])
        elif isinstance(item, exp.PrimaryKey):
            key = tuple(e.name for e in item.expressions)
        else:
            raise SqlError(f"unsupported table element: {item.sql('spark')}", **where)
    path = None
    if catalog_table is not None:
        assert locate is not None, "a project's sources are parsed with a catalog to locate tables in"
        path, columns_now = locate(catalog_table, where, columns=not fields)
        if columns_now is not None:
            fields, sql_types = list(columns_now[0]), list(columns_now[1])
    elif not fields:
        raise SqlError(
            "the CREATE TABLE declares no columns",
            **where,
            hint="list the columns: CREATE TABLE name (id BIGINT, ...); only a table of the catalog, "
            "WITH ('table' = 'schema.table'), may leave them out",
        )
    columns = [f.name for f in fields]
    if key:
        key = tuple(_require_column(col, columns, where, "PRIMARY KEY") for col in key)
    watermark = statement.watermark
    if watermark:
        column = _require_column(watermark.column, columns, where, "WATERMARK FOR")
        watermark = Watermark(
            column, watermark.expression, watermark.line, _watermark_delay(watermark, column, fields, where)
        )
    append_only = options.get("append_only", "false").lower()
    if append_only not in ("true", "false"):
        raise SqlError(f"'append_only' must be 'true' or 'false', not {append_only!r}", **where)
    if path is None:
        path = (
            config.table_path(options["path"], where)
            if "path" in options
            else join_uri(config.sources_dir(), name)
        )
    idle_timeout = None
    if "idle_timeout" in options:
        if watermark is None:
            raise SqlError(
                "'idle_timeout' is for a source with event time: it lets its WATERMARK go idle",
                **where,
                hint="declare WATERMARK FOR <column> AS <column> - INTERVAL '5' SECOND, or drop the option",
            )
        idle_timeout = option_micros("idle_timeout", options["idle_timeout"], where)
    expectations = check_columns(statement.expectations, columns, statement.file, f"source {name}")
    return SourceDef(
        name,
        statement.file,
        statement.line,
        pa.schema(fields),
        tuple(sql_types),
        path,
        key,
        append_only == "true",
        watermark,
        expectations,
        path_declared="path" in options or catalog_table is not None,
        idle_timeout=idle_timeout,
        catalog_table=catalog_table,
    )


def _catalog_table(options: dict[str, str], where: dict) -> str | None:
    """The lower-case name of WITH ('table' = 'schema.table'), checked; None without the option."""
    if "table" not in options:
        return None
    if "path" in options:
        raise SqlError(
            "'table' and 'path' both say where the table is",
            **where,
            hint="keep one: 'table' names a table of Spark's catalog, 'path' a Delta table's folder",
        )
    parts = options["table"].split(".")
    if not 2 <= len(parts) <= 3 or not all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", p) for p in parts):
        raise SqlError(
            f"'table' = {options['table']!r} is not a catalog table's name",
            **where,
            hint="write schema.table (Spark's session catalog) or catalog.schema.table",
        )
    if parts[0].lower() == "spark_catalog" and len(parts) == 3:
        parts = parts[1:]
    return ".".join(parts).lower()


def _watermark_delay(watermark: Watermark, column: str, fields: list[pa.Field], where: dict) -> int:
    """The delay of `WATERMARK FOR ts AS ts - INTERVAL 'n' UNIT` (or `AS ts`: none), in microseconds."""
    at = {**where, "line": watermark.line}
    if not pa.types.is_timestamp(next(f.type for f in fields if f.name == column)):
        raise SqlError(
            f"WATERMARK FOR {column}: the column is not a TIMESTAMP",
            **at,
            hint="declare the watermark on the table's event-time column (TIMESTAMP)",
        )
    m = re.fullmatch(
        r"`?(\w+)`?\s*(?:-\s*INTERVAL\s+'(\d+)'\s+([A-Za-z]+))?", watermark.expression.strip(), re.IGNORECASE
    )
    micros = unit_micros(m.group(3)) if m and m.group(3) else 1 if m else None
    if m is None or m.group(1).lower() != column.lower() or micros is None:
        raise SqlError(
            f"cannot read the watermark {watermark.expression!r}",
            **at,
            hint=f"write WATERMARK FOR {column} AS {column} - INTERVAL '5' SECOND (or AS {column})",
        )
    return int(m.group(2)) * micros if m.group(2) else 0


def _options(tree: exp.Create, where: dict) -> dict[str, str]:
    props = tree.args.get("properties")
    options: dict[str, str] = {}
    for p in props.expressions if props else []:
        if not isinstance(p, exp.Property):
            raise SqlError(
                f"unsupported table property {p.sql('spark')}",
                **where,
                hint="write options as WITH ('path' = '...', 'append_only' = 'true')",
            )
        options[p.name.lower() if p.this is not None else ""] = p.args["value"].name
    return options


def _require_column(col: str, columns: list[str], where: dict, clause: str) -> str:
    """The declared spelling of `col` (names are case-insensitive, as in Spark), or an error."""
    for declared in columns:
        if declared.lower() == col.lower():
            return declared
    raise SqlError(
        f"{clause} names unknown column {col!r}", **where, hint=did_you_mean(col, columns, "columns")
    )
