"""Event-time windows in a view's SELECT, whichever of the three forms users write (seed 002, Spark, Flink):

- Spark's own: `GROUP BY window(ts, '10 minutes'[, '5 minutes'[, '1 minute']])` (tumbling or hopping, with an
  optional start offset) and `session_window(ts, '5 minutes')`, read in SELECT as `window.start`/`window.end`
  (`session_window.start`/`.end`);
- Calcite's group windows (seed 002): `GROUP BY team, TUMBLE(ts, INTERVAL '2' MINUTE)`, `HOP(ts, slide, size)`,
  `SESSION(ts, gap)`, read as `TUMBLE_START(...)`/`TUMBLE_END(...)` (and HOP_/SESSION_);
- Flink's table-valued functions in FROM: `TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '10' SECOND))`
  and `HOP(TABLE bid, DESCRIPTOR(ts), slide, size)`, which add `window_start`, `window_end`, `window_time`.

All of them become one `WindowSpec`: the binder puts a WindowAssign node (plan/nodes.py) under the aggregate, and
`spark_form` writes the view back as SQL Spark runs, for views recomputed in full.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from mvengine.sql.time_syntax import SESSION_FUNCTION, WINDOW_FUNCTION, unit_micros

GROUP_WINDOWS = {"tumble": "tumble", "hop": "hop", "session": "session"}  # Calcite's GROUP BY functions
BOUND_FUNCTIONS = {f"{kind}_{bound}": bound for kind in GROUP_WINDOWS for bound in ("start", "end")}
SPARK_WINDOWS = {WINDOW_FUNCTION: "window", "session_window": "session_window"}


class WindowError(Exception):
    """A window call whose arguments cannot be read; `at` is the argument at fault."""

    def __init__(self, message: str, at: exp.Expression, hint: str) -> None:
        super().__init__(message)
        self.message, self.at, self.hint = message, at, hint


@dataclass(frozen=True)
class WindowSpec:
    kind: str  # "tumble", "hop" or "session"
    time: exp.Expression  # the event-time column, as written (bound by the binder)
    size: int  # microseconds; a session's gap
    slide: int  # microseconds; = size for tumbling windows
    offset: int  # microseconds the windows start after the epoch's boundaries
    qualifier: str  # how SELECT names the bounds: window.start, session_window.start (or the FROM alias)
    call: exp.Expression  # the call as written, for errors and for spark_form

    def describe(self) -> str:
        if self.kind == "session":
            return f"session window, gap {duration(self.size)}"
        if self.kind == "tumble":
            text = f"tumbling window of {duration(self.size)}"
        else:
            text = f"hopping window of {duration(self.size)} every {duration(self.slide)}"
        return text + (f", starting {duration(self.offset)} after the epoch's" if self.offset else "")

    def spark_call(self, time_sql: str) -> str:
        """Spark's own call computing these windows (a struct of start and end), `window` spelled as sqlglot
        parses it (spark_sql spells it back)."""
        if self.kind == "session":
            return f"session_window({time_sql}, '{self.size} microseconds')"
        return (
            f"{WINDOW_FUNCTION}({time_sql}, '{self.size} microseconds', '{self.slide} microseconds', "
            f"'{self.offset} microseconds')"
        )


def function_name(e: exp.Expression) -> str | None:
    """A function call's name, lower-case (Calcite's SESSION as sql/time_syntax.py renamed it: session)."""
    if not isinstance(e, exp.Anonymous):
        return None
    name = str(e.this).lower()
    return "session" if name == SESSION_FUNCTION else name


def group_window(e: exp.Expression) -> WindowSpec | None:
    """The window a GROUP BY item calls for (None when it is no window call)."""
    name = function_name(e)
    args = e.expressions if name else []
    if name == WINDOW_FUNCTION:
        _arity(e, args, 2, 4, "window(ts, '10 minutes'[, slide[, start offset]])")
        size = micros(args[1])
        slide = micros(args[2]) if len(args) > 2 else size
        offset = micros(args[3]) if len(args) > 3 else 0
        return _checked(
            WindowSpec("tumble" if slide == size else "hop", args[0], size, slide, offset, "window", e)
        )
    if name == "session_window":
        _arity(e, args, 2, 2, "session_window(ts, '5 minutes')")
        return _checked(WindowSpec("session", args[0], micros(args[1]), 0, 0, "session_window", e))
    if name in GROUP_WINDOWS:
        return calcite_window(name, args, e, "session_window" if name == "session" else "window")
    return None


def calcite_window(name: str, args: list[exp.Expression], e: exp.Expression, qualifier: str) -> WindowSpec:
    """TUMBLE(ts, size), HOP(ts, slide, size) and SESSION(ts, gap): Calcite's argument order (and Flink's)."""
    if name == "tumble":
        _arity(e, args, 2, 3, "TUMBLE(ts, INTERVAL '2' MINUTE)")
        size = micros(args[1])
        return _checked(
            WindowSpec("tumble", args[0], size, size, micros(args[2]) if len(args) > 2 else 0, qualifier, e)
        )
    if name == "hop":
        _arity(e, args, 3, 4, "HOP(ts, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE) (slide, then size)")
        size, slide = micros(args[2]), micros(args[1])
        offset = micros(args[3]) if len(args) > 3 else 0
        return _checked(
            WindowSpec("tumble" if size == slide else "hop", args[0], size, slide, offset, qualifier, e)
        )
    _arity(e, args, 2, 2, "SESSION(ts, INTERVAL '5' MINUTE)")
    return _checked(WindowSpec("session", args[0], micros(args[1]), 0, 0, qualifier, e))


def table_window(e: exp.Expression) -> tuple[str, WindowSpec] | None:
    """A FROM item `TUMBLE(bid, ts, size)` (Flink's TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), size)), as
    sql/time_syntax.py leaves it): the table's name and the window; None for another FROM item."""
    name = function_name(e)
    if name not in ("tumble", "hop", "session", "cumulate"):
        return None
    args = e.expressions
    if name in ("session", "cumulate"):
        raise WindowError(
            f"the table-valued function {name.upper()} is not supported",
            e,
            "use TUMBLE or HOP in FROM, or GROUP BY session_window(ts, '5 minutes')",
        )
    if not args or not isinstance(args[0], exp.Column) or len(args) < 3:
        raise WindowError(
            f"cannot read {name.upper()}(...) in FROM",
            e,
            f"write TABLE({name.upper()}(TABLE source, DESCRIPTOR(ts), "
            + ("INTERVAL '10' SECOND))" if name == "tumble" else "slide, size))"),
        )
    spec = calcite_window(name, args[1:], e, "")
    return args[0].name, spec


def _arity(e: exp.Expression, args: list[exp.Expression], least: int, most: int, form: str) -> None:
    if not least <= len(args) <= most:
        raise WindowError(
            f"{_call_name(e)}(...) takes {least}"
            + (f" to {most}" if most > least else "")
            + f" arguments, not {len(args)}",
            e,
            f"write {form}",
        )


def _checked(spec: WindowSpec) -> WindowSpec:
    if spec.size <= 0 or (spec.kind != "session" and spec.slide <= 0):
        raise WindowError("a window's size and slide must be positive", spec.call, "e.g. '10 minutes'")
    if spec.kind == "hop" and spec.slide > spec.size:
        raise WindowError(
            f"the slide ({duration(spec.slide)}) is longer than the window ({duration(spec.size)}): "
            "rows between windows would belong to none",
            spec.call,
            "make the slide at most the window's size",
        )
    if abs(spec.offset) >= spec.slide and spec.kind != "session":
        raise WindowError(
            "the start offset must be shorter than the slide",
            spec.call,
            "e.g. window(ts, '1 hour', '1 hour', '15 minutes')",
        )
    return spec


def _call_name(e: exp.Expression) -> str:
    name = function_name(e) or ""
    return "window" if name == WINDOW_FUNCTION else name.upper() if name in GROUP_WINDOWS else name


def micros(e: exp.Expression) -> int:
    """A duration argument in microseconds: Spark's '10 minutes' (also '1 hour 30 minutes'), a number of
    microseconds, or INTERVAL '10' SECOND."""
    if isinstance(e, exp.Interval):
        unit = e.args.get("unit")
        value = e.this.name if isinstance(e.this, exp.Literal) else ""
        if unit is None:
            return _duration_text(value, e)
        return _duration_text(f"{value} {unit.name}", e)
    if isinstance(e, exp.Literal) and e.is_string:
        return _duration_text(e.name, e)
    if isinstance(e, exp.Literal):
        return int(e.name)
    raise WindowError(
        f"the duration {e.sql('spark')} is not a constant",
        e,
        "write it as '10 minutes' or INTERVAL '10' MINUTE",
    )


def _duration_text(text: str, at: exp.Expression) -> int:
    parts = re.findall(r"(-?\d+)\s*([A-Za-z]+)", text)
    leftover = re.sub(r"(-?\d+)\s*([A-Za-z]+)", "", text.lower().removeprefix("interval")).strip()
    total = 0
    for value, unit in parts:
        unit_us = unit_micros(unit)
        if unit_us is None:
            parts = []
            break
        total += int(value) * unit_us
    if not parts or leftover:
        raise WindowError(
            f"cannot read the duration {text!r}",
            at,
            "write e.g. '10 seconds', '5 minutes', '1 hour' (months and years vary in length)",
        )
    return total


def duration(us: int) -> str:
    """A duration in the largest unit that divides it: 10 minutes, 90 seconds, 1500 milliseconds."""
    for name, size in (
        ("day", 86_400_000_000),
        ("hour", 3_600_000_000),
        ("minute", 60_000_000),
        ("second", 1_000_000),
        ("millisecond", 1000),
    ):
        if us and us % size == 0:
            n = us // size
            return f"{n} {name}{'s' if n != 1 else ''}"
    return f"{us} microseconds"


def spark_sql(query: exp.Expr, table_windows: dict[str, str]) -> str:
    """The view's query as SQL Spark runs: Calcite's group windows as Spark's window()/session_window() and
    their TUMBLE_START/... as the struct's fields, and each table-valued window function as the subquery the
    binder wrote for it (`table_windows`, by the FROM item's SQL)."""

    def spark(e: exp.Expression) -> exp.Expression:
        name = function_name(e)
        if isinstance(e, exp.Table) and isinstance(e.this, exp.Anonymous) and e.sql("spark") in table_windows:
            select = sqlglot.parse_one(f"SELECT * FROM {table_windows[e.sql('spark')]}", read="spark")
            table: exp.Expression = select.args["from_"].this
            return table
        if name == "proctime" and not e.expressions:  # the recomputation's time
            return exp.Anonymous(this="current_timestamp", expressions=[])
        if name in BOUND_FUNCTIONS:
            qualifier = "session_window" if name.startswith("session") else "window"
            return exp.column(BOUND_FUNCTIONS[name], table=qualifier)
        if name in GROUP_WINDOWS or name in SPARK_WINDOWS:
            spec = group_window(e)
            if spec is not None:
                return exp.maybe_parse(spec.spark_call(spec.time.sql("spark")), dialect="spark")
        return e

    text = query.transform(spark).sql("spark")
    return re.sub(rf"\b{WINDOW_FUNCTION}\(", "window(", text, flags=re.IGNORECASE)
