"""Rows out of `mv query` and `mv changes`: an aligned table with a row count (for people), JSON lines, CSV, or a
Parquet file (for programs)."""

from __future__ import annotations

import csv
import io
import json
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import pyarrow as pa

from mvengine.cli.console import Console
from mvengine.errors import MvError
from mvengine.names import quote_identifier
from mvengine.reading.versions import show_time

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

FORMATS = ("table", "json", "csv", "parquet")


class RowWriter:
    """Writes one result, or (for `--follow`) a result that keeps growing: the table header and the CSV header
    come once, every later part continues below."""

    def __init__(
        self, console: Console, fmt: str, out: str | None = None, *, limit: int | None = None
    ) -> None:
        if fmt not in FORMATS:
            raise MvError(f"unknown format {fmt!r}", hint=f"use one of {', '.join(FORMATS)}")
        if fmt == "parquet" and not out:
            raise MvError(
                "--format parquet writes a file: name it with --out FILE",
                hint="e.g. --format parquet --out result.parquet",
            )
        if limit is not None and limit < 0:
            raise MvError(f"--limit must be 0 or more, not {limit}")
        self.console, self.fmt, self.out, self.limit = console, fmt, out, limit
        self.rows = 0
        self._widths: list[int] | None = None
        self._file: TextIO | None = None

    def write(self, df: DataFrame) -> None:
        if self.limit is not None:
            if self.rows >= self.limit:
                return
            df = df.limit(self.limit - self.rows)
        if self.fmt == "json":
            from pyspark.sql import functions as F

            options = {"ignoreNullFields": "false"}
            rows = df.select(F.to_json(F.struct(*[F.col(quote_identifier(c)) for c in df.columns]), options))
            lines = [r[0] for r in rows.collect()]
            self.rows += len(lines)
            self._emit("\n".join(lines), bool(lines))
            return
        table = df.toArrow()
        self.rows += table.num_rows
        if self.fmt == "parquet":
            import pyarrow.parquet as pq

            if self.rows > table.num_rows:
                raise MvError("a Parquet file takes one finished result", hint="leave out --follow")
            pq.write_table(table, self.out)
        elif self.fmt == "csv":
            buffer = io.StringIO()
            writer = csv.writer(buffer, lineterminator="\n")
            if self.rows == table.num_rows:
                writer.writerow(table.column_names)
            writer.writerows([[_cell(v, null="") for v in row] for row in _rows(table)])
            self._emit(buffer.getvalue().rstrip("\n"), buffer.tell() > 0)
        else:
            self._table(table)

    def finish(self, footer: str = "") -> None:
        """The row count (table format), then `footer`; closes the --out file."""
        if self.fmt == "table":
            count = f"({self.rows} row{'s' if self.rows != 1 else ''})"
            self._emit(count + (f"  {footer}" if footer else ""), True)
        elif self.fmt == "parquet":
            self.console.out(f"wrote {self.rows} rows to {self.out}" + (f"  {footer}" if footer else ""))
        if self._file is not None:
            self._file.close()

    def _table(self, table: pa.Table) -> None:
        header = table.column_names
        cells = [[_cell(v) for v in row] for row in _rows(table)]
        numeric = [
            pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
            for t in table.schema.types
        ]
        first = self._widths is None
        widths = [max([len(h), *[len(r[i]) for r in cells]]) for i, h in enumerate(header)]
        self._widths = widths if first else [max(a, b) for a, b in zip(self._widths or widths, widths)]
        lines = [_line(header, self._widths, [False] * len(header))] if first else []
        lines += [_line(r, self._widths, numeric) for r in cells]
        self._emit("\n".join(lines), bool(lines))

    def _emit(self, text: str, any_text: bool) -> None:
        if not any_text:
            return
        if self.out:
            if self._file is None:
                self._file = Path(self.out).open("w", encoding="utf-8")  # noqa: SIM115 (closed in finish)
            self._file.write(text + "\n")
            self._file.flush()
        else:
            self.console.out(text)


def _line(cells: list[str], widths: list[int], right: list[bool]) -> str:
    return "  ".join(c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right)).rstrip()


def _rows(table: pa.Table) -> list[tuple[Any, ...]]:
    columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return list(zip(*columns))


def _cell(value: Any, null: str = "NULL") -> str:
    """A value as mvengine prints it: UTC times without a zone, exact decimals, lowercase booleans."""
    if value is None:
        return null
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return show_time(value)
    if isinstance(value, date | Decimal):
        return str(value)
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, list | dict):
        return json.dumps(value, default=str)
    return str(value)
