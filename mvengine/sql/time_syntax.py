"""The event-time syntax sqlglot's Spark dialect cannot parse, made parseable before parsing (DESIGN.md §3).

Every rewrite keeps each token at its place in the file (text is blanked or replaced by text of the same length), so
the positions sqlglot records, and every error, stay the file's own:

- Spark's `window(ts, '10 minutes')` (WINDOW is a keyword to sqlglot): the name becomes `mv_win`, which
  plan/windows.py reads back as Spark's window; Calcite's `SESSION(ts, gap)` likewise becomes `mv_sesn`.
- Flink's table-valued functions, `TABLE(TUMBLE(TABLE bid, DESCRIPTOR(date_time), INTERVAL '10' SECOND))`: the
  `TABLE(`, `TABLE`, `DESCRIPTOR(` words and their parentheses are blanked, leaving `TUMBLE(bid, date_time, ...)`,
  a table function in FROM.
- Seed 002's `EMIT ...` clause after a view's SELECT is cut out and parsed here into an `Emit`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlglot.tokens import Token, TokenType

from mvengine.errors import SqlError

WINDOW_FUNCTION = "mv_win"  # what `window(` is renamed to: as long as `window`, so that columns stay in place
SESSION_FUNCTION = "mv_sesn"  # and Calcite's `SESSION(`, which sqlglot reads as something else
TABLE_FUNCTIONS = ("TUMBLE", "HOP", "CUMULATE", "SESSION")
EMIT_FORMS = ("EMIT WHEN WATERMARK PAST <column> [AND THEN AFTER <interval>]", "EMIT AFTER <interval>")


@dataclass(frozen=True)
class Emit:
    """When a view's rows are emitted (seed 002): `watermark_past` names the window bound a row waits for,
    `late_after` the processing-time delay of late updates after that (None: late rows are not emitted),
    `after` the unaligned delay of `EMIT AFTER`. Intervals are in microseconds."""

    watermark_past: str | None
    late_after: int | None
    after: int | None
    line: int
    col: int
    text: str

    def describe(self) -> str:
        return self.text


def rewrite_event_time(body: str, chunk: list[Token], offset: int) -> str:
    """`body` (the statement's text, starting at file offset `offset`) with `window(` renamed and table-valued
    window functions reduced to plain table functions."""
    text = list(body)

    def blank(tok: Token) -> None:
        for i in range(tok.start - offset, tok.end + 1 - offset):
            if text[i] != "\n":
                text[i] = " "

    for i, tok in enumerate(chunk[:-1]):
        following = chunk[i + 1]
        if tok.token_type == TokenType.WINDOW and following.token_type == TokenType.L_PAREN:
            text[tok.start - offset : tok.end + 1 - offset] = WINDOW_FUNCTION
        elif tok.text.upper() == "SESSION" and following.token_type == TokenType.L_PAREN:
            text[tok.start - offset : tok.end + 1 - offset] = SESSION_FUNCTION
        elif (
            tok.token_type == TokenType.TABLE
            and following.token_type == TokenType.L_PAREN
            and i + 2 < len(chunk)
            and chunk[i + 2].text.upper() in TABLE_FUNCTIONS
        ):
            close = _closing(chunk, i + 1)
            if close is None:
                continue
            blank(tok)
            blank(following)
            blank(chunk[close])
            for j in range(i + 3, close):
                inner = chunk[j]
                if inner.token_type == TokenType.TABLE and chunk[j - 1].token_type in (
                    TokenType.L_PAREN,
                    TokenType.COMMA,
                ):
                    blank(inner)
                elif inner.text.upper() == "DESCRIPTOR" and chunk[j + 1].token_type == TokenType.L_PAREN:
                    end = _closing(chunk, j + 1)
                    if end is not None:
                        blank(inner)
                        blank(chunk[j + 1])
                        blank(chunk[end])
    return "".join(text)


def first_col(tok: Token) -> int:
    """The column of a token's first character (sqlglot records its last)."""
    return tok.col - (tok.end - tok.start)


def _closing(chunk: list[Token], open_at: int) -> int | None:
    depth = 0
    for j in range(open_at, len(chunk)):
        depth += chunk[j].token_type == TokenType.L_PAREN
        depth -= chunk[j].token_type == TokenType.R_PAREN
        if depth == 0:
            return j
    return None


def cut_emit(body: str, chunk: list[Token], offset: int, file: str) -> tuple[str, Emit | None]:
    """The statement without its trailing `EMIT ...` clause (blanked), and the clause."""
    depth = 0
    for i, tok in enumerate(chunk):
        depth += tok.token_type == TokenType.L_PAREN
        depth -= tok.token_type == TokenType.R_PAREN
        if depth == 0 and tok.text.upper() == "EMIT" and i > 0:
            clause_text = body[tok.start - offset :]
            emit = _parse_emit(clause_text, tok, file)
            blanked = "".join(c if c == "\n" else " " for c in clause_text)
            return body[: tok.start - offset] + blanked, emit
    return body, None


_INTERVAL = r"INTERVAL\s+'?(\d+)'?\s+([A-Za-z]+)|(\d+)\s+([A-Za-z]+)"
_EMIT = re.compile(
    rf"EMIT\s+(?:WHEN\s+WATERMARK\s+PAST\s+(?P<column>`[^`]+`|[A-Za-z_][A-Za-z0-9_.]*)"
    rf"(?:\s+AND\s+THEN\s+AFTER\s+(?P<late>{_INTERVAL}))?|AFTER\s+(?P<after>{_INTERVAL}))\s*$",
    re.IGNORECASE | re.DOTALL,
)


def _parse_emit(text: str, tok: Token, file: str) -> Emit:
    clause = re.sub(r"--[^\n]*", " ", text).strip()
    m = _EMIT.match(clause)
    if not m:
        raise SqlError(
            f"cannot read the EMIT clause {' '.join(clause.split())!r}",
            file=file,
            line=tok.line,
            col=first_col(tok),
            hint="write " + " or ".join(EMIT_FORMS) + ", e.g. EMIT WHEN WATERMARK PAST "
            "window_end AND THEN AFTER INTERVAL '1' MINUTE",
        )
    column = m.group("column")
    if column is not None:
        column = column.strip("`").split(".")[-1]
    late = m.group("late")
    after = m.group("after")
    return Emit(
        column,
        None if late is None else interval_micros(late, file, tok),
        None if after is None else interval_micros(after, file, tok),
        tok.line,
        first_col(tok),
        " ".join(clause.split()),
    )


_UNITS = {
    "microsecond": 1,
    "millisecond": 1000,
    "second": 1_000_000,
    "minute": 60_000_000,
    "hour": 3_600_000_000,
    "day": 86_400_000_000,
    "week": 7 * 86_400_000_000,
}


def unit_micros(unit: str) -> int | None:
    """Microseconds in one `unit` (SECOND, seconds, ms...), None for an unknown one."""
    unit = unit.lower()
    unit = {
        "us": "microsecond",
        "ms": "millisecond",
        "s": "second",
        "sec": "second",
        "min": "minute",
        "h": "hour",
        "d": "day",
    }.get(unit, unit)
    return _UNITS.get(unit.removesuffix("s"))


def duration_micros(text: str) -> int | None:
    """`1 hour`, `INTERVAL '30' SECOND`, `'5' minutes`: microseconds; None when it is not a duration."""
    m = re.fullmatch(r"\s*(?:INTERVAL\s+)?'?(\d+)'?\s+([A-Za-z]+)\s*", text, re.IGNORECASE)
    micros = unit_micros(m.group(2)) if m else None
    return None if m is None or micros is None else int(m.group(1)) * micros


def option_micros(option: str, text: str, where: dict) -> int:
    """A duration option, `WITH ('<option>' = '1 hour')` (or seconds, minutes, days...), in microseconds."""
    micros = duration_micros(text)
    if micros is None:
        raise SqlError(
            f"cannot read {option} {text!r}",
            **where,
            hint=f"write WITH ('{option}' = '1 hour') (or seconds, minutes, days)",
        )
    return micros


def interval_micros(text: str, file: str, tok: Token) -> int:
    micros = duration_micros(text)
    if micros is None:
        raise SqlError(
            f"cannot read the interval {text.strip()!r}",
            file=file,
            line=tok.line,
            col=first_col(tok),
            hint="write INTERVAL 'n' SECOND (or MINUTE, HOUR, DAY)",
        )
    return micros
