"""Data-quality expectations declared on sources and views (docs/guides/expectations.md), as Databricks pipelines
declare them, in the parentheses after the table's name:

    CREATE TABLE orders (id BIGINT, price DECIMAL(10,2), status STRING,
                         CONSTRAINT valid_price EXPECT (price > 0) ON VIOLATION QUARANTINE,
                         CONSTRAINT one_per_id EXPECT UNIQUE (id) ON VIOLATION FAIL UPDATE);
    CREATE MATERIALIZED VIEW totals (CONSTRAINT known EXPECT COLUMN status VALUES IN ('new', 'paid')) AS ...

sqlglot does not know the clause, so it is cut out of the text (blanked, so that positions stay the file's, as
the WATERMARK clause is) and read here. A row-level expectation (a predicate, `COLUMN x NOT NULL`, `COLUMN x
VALUES IN (...)`) judges each row a batch inserts; a table-level one (`UNIQUE (k, ...)`, `ROW COUNT BETWEEN a
AND b`) judges the table after the batch, and can only warn or fail the update.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError
from sqlglot.tokens import Token, TokenType

from mvengine.errors import SqlError

OUTCOMES = ("WARN", "DROP ROW", "FAIL UPDATE", "QUARANTINE")
ROW_KINDS = ("predicate", "not_null", "values_in")
TABLE_KINDS = ("unique", "row_count")
FORMS = (
    "CONSTRAINT <name> EXPECT (<predicate>)",
    "CONSTRAINT <name> EXPECT COLUMN <column> NOT NULL",
    "CONSTRAINT <name> EXPECT COLUMN <column> VALUES IN (<value>, ...)",
    "CONSTRAINT <name> EXPECT UNIQUE (<column>, ...)",
    "CONSTRAINT <name> EXPECT ROW COUNT BETWEEN <a> AND <b>",
)


@dataclass(frozen=True)
class Expectation:
    """One declared expectation. `condition` is what a good row satisfies, as Spark SQL (row-level kinds); a
    row fails when it is FALSE (NULL passes, as in a CHECK constraint), except for `not_null`."""

    name: str
    kind: str  # one of ROW_KINDS or TABLE_KINDS
    on_violation: str  # one of OUTCOMES
    line: int
    col: int
    text: str  # the clause as written
    condition: exp.Expression | None = None  # row-level kinds
    columns: tuple[str, ...] = ()  # the columns it reads (as written)
    values: tuple[object, ...] = ()  # values_in
    low: int | None = None  # row_count
    high: int | None = None

    @property
    def row_level(self) -> bool:
        return self.kind in ROW_KINDS

    @property
    def row_condition(self) -> exp.Expression:
        """The condition of a row-level expectation (every kind has one but unique and row_count)."""
        assert self.condition is not None, self.kind
        return self.condition

    @property
    def drops(self) -> bool:
        """Whether a failing row is kept out of the table (and out of everything downstream)."""
        return self.on_violation in ("DROP ROW", "QUARANTINE")


def cut_expectations(body: str, chunk: list[Token], offset: int, file: str) -> tuple[str, list[Expectation]]:
    """`body` (a statement starting at file offset `offset`, tokens `chunk`) without the CONSTRAINT ... EXPECT
    elements of its first parenthesised list, and those elements read. A list left empty is blanked too."""
    open_at = next((i for i, t in enumerate(chunk) if t.token_type == TokenType.L_PAREN), None)
    if open_at is None or _before_query(chunk, open_at):
        return body, []
    elements, close_at = _elements(chunk, open_at)
    text = list(body)
    found: list[Expectation] = []
    kept = 0
    for start, end in elements:
        tokens = chunk[start:end]
        if len(tokens) >= 3 and tokens[0].text.upper() == "CONSTRAINT" and tokens[2].text.upper() == "EXPECT":
            found.append(_read(tokens, body, offset, file))
            # Blank the element and the comma that separates it from its neighbour.
            cut_from = chunk[start - 1].start if start - 1 > open_at else tokens[0].start
            cut_to = tokens[-1].end + 1
            if start - 1 == open_at and end < close_at:
                cut_to = chunk[end].end + 1  # the comma after a first element
            _blank(text, cut_from - offset, cut_to - offset)
        else:
            kept += 1
    if found and kept == 0:  # `v (CONSTRAINT ...) AS`: no column list is left
        _blank(text, chunk[open_at].start - offset, chunk[close_at].end + 1 - offset)
    seen: set[str] = set()
    for e in found:
        if e.name.lower() in seen:
            raise SqlError(
                f"expectation {e.name!r} is declared twice",
                file=file,
                line=e.line,
                col=e.col,
                hint="give each CONSTRAINT ... EXPECT its own name",
            )
        seen.add(e.name.lower())
    return "".join(text), found


def _before_query(chunk: list[Token], open_at: int) -> bool:
    """Whether the first parenthesis comes after the view's AS (it is the query's, not a column list)."""
    return any(t.token_type == TokenType.ALIAS or t.token_type == TokenType.SELECT for t in chunk[:open_at])


def _elements(chunk: list[Token], open_at: int) -> tuple[list[tuple[int, int]], int]:
    """The token ranges [start, end) of the list's comma-separated elements, and the closing paren's index."""
    elements, depth, start = [], 0, open_at + 1
    for i in range(open_at, len(chunk)):
        kind = chunk[i].token_type
        depth += (kind == TokenType.L_PAREN) - (kind == TokenType.R_PAREN)
        if depth == 1 and kind == TokenType.COMMA:
            elements.append((start, i))
            start = i + 1
        elif depth == 0:
            elements.append((start, i))
            return [e for e in elements if e[1] > e[0]], i
    return [e for e in elements if e[1] > e[0]], len(chunk) - 1


def _blank(text: list[str], start: int, end: int) -> None:
    for i in range(max(start, 0), min(end, len(text))):
        if text[i] != "\n":
            text[i] = " "


def _read(tokens: list[Token], body: str, offset: int, file: str) -> Expectation:
    """One `CONSTRAINT name EXPECT ... [ON VIOLATION outcome]` element."""
    first = tokens[0]
    clause = body[first.start - offset : tokens[-1].end + 1 - offset]
    name = tokens[1].text

    def error(message: str, at: Token = first, forms: bool = True) -> SqlError:
        return SqlError(
            f"expectation {name}: {message}",
            file=file,
            line=at.line,
            col=_column(at),
            hint=(
                "write one of: " + "; ".join(FORMS) + ", then optionally ON VIOLATION " + " | ".join(OUTCOMES)
            )
            if forms
            else None,
        )

    words = [t.text.upper() for t in tokens]
    outcome, rest = "WARN", tokens[3:]
    if "ON" in words[3:]:
        at = 3 + words[3:].index("ON")
        said = " ".join(words[at + 1 :])
        if not said.startswith("VIOLATION ") or said[len("VIOLATION ") :] not in OUTCOMES:
            raise error(f"cannot read {' '.join(t.text for t in tokens[at:])!r}", tokens[at])
        outcome, rest = said[len("VIOLATION ") :], tokens[3:at]
    if not rest:
        raise error("nothing follows EXPECT")
    head = [t.text.upper() for t in rest]
    where: dict[str, Any] = {
        "name": name,
        "on_violation": outcome,
        "line": first.line,
        "col": _column(first),
        "text": clause,
    }

    def inner(open_index: int) -> str:
        """The text inside the parentheses that open at rest[open_index] and close at rest[-1]."""
        if rest[open_index].token_type != TokenType.L_PAREN or rest[-1].token_type != TokenType.R_PAREN:
            raise error("expected a parenthesised list", rest[min(open_index, len(rest) - 1)])
        return body[rest[open_index].end + 1 - offset : rest[-1].start - offset]

    if rest[0].token_type == TokenType.L_PAREN:
        condition = _parse(inner(0), error)
        columns = tuple(dict.fromkeys(c.name for c in condition.find_all(exp.Column)))
        if not columns:
            raise error("the predicate reads no column")
        return Expectation(kind="predicate", condition=condition, columns=columns, **where)
    if head[0] == "COLUMN" and len(rest) >= 3:
        column = rest[1].text
        if head[2:] == ["NOT", "NULL"]:
            return Expectation(
                kind="not_null",
                condition=exp.column(column).is_(exp.null()).not_(),
                columns=(column,),
                **where,
            )
        if head[2:4] == ["VALUES", "IN"] and len(rest) > 4:
            listed = _parse(f"x IN ({inner(4)})", error)
            if not all(isinstance(v, (exp.Literal, exp.Boolean, exp.Neg)) for v in listed.expressions):
                raise error("VALUES IN takes literal values", rest[4], False)
            values = tuple(_literal(v) for v in listed.expressions)
            condition = exp.column(column).isin(*[v.copy() for v in listed.expressions])
            return Expectation(
                kind="values_in", condition=condition, columns=(column,), values=values, **where
            )
        raise error(f"cannot read {' '.join(t.text for t in rest)!r}", rest[0])
    if head[0] == "UNIQUE" and len(rest) > 1:
        listed = _parse(f"({inner(1)})", error)
        items = listed.expressions if isinstance(listed, exp.Tuple) else [listed.this]
        if not all(isinstance(c, exp.Column) for c in items):
            raise error("UNIQUE takes column names", rest[1], False)
        return Expectation(kind="unique", columns=tuple(c.name for c in items), **_table_level(where, error))
    if head[:3] == ["ROW", "COUNT", "BETWEEN"] and len(head) == 6 and head[4] == "AND":
        try:
            low, high = int(rest[3].text), int(rest[5].text)
        except ValueError:
            raise error("ROW COUNT BETWEEN takes two whole numbers", rest[3]) from None
        if low > high:
            raise error(
                f"ROW COUNT BETWEEN {low} AND {high}: the bounds are the wrong way round", rest[3], False
            )
        return Expectation(kind="row_count", low=low, high=high, **_table_level(where, error))
    raise error(f"cannot read {' '.join(t.text for t in rest)!r}", rest[0])


def _column(tok: Token) -> int:
    """The column a token starts at (sqlglot records where it ends)."""
    return tok.col - len(tok.text) + 1


def _table_level(where: dict, error: Callable[..., SqlError]) -> dict:
    if where["on_violation"] not in ("WARN", "FAIL UPDATE"):
        raise error(
            f"ON VIOLATION {where['on_violation']} needs a row to act on; a table-level expectation "
            "(UNIQUE, ROW COUNT) can only WARN or FAIL UPDATE",
            forms=False,
        )
    return where


def _parse(text: str, error: Callable[..., SqlError]) -> exp.Expression:
    try:
        tree = sqlglot.parse_one(text, read="spark")
    except ParseError as e:
        raise error(
            f"cannot read {text.strip()!r} ({e.errors[0].get('description') if e.errors else e})"
        ) from None
    assert isinstance(tree, exp.Expression)
    return tree


def _literal(v: exp.Expression) -> Any:  # bool, str, int or float
    if isinstance(v, exp.Boolean):
        return v.this
    if isinstance(v, exp.Neg):
        return -_literal(v.this)
    if v.is_string:
        return v.this
    text = v.this
    return int(text) if text.lstrip("-").isdigit() else float(text)


def check_columns(
    expectations: tuple[Expectation, ...], columns: list[str], file: str, obj: str
) -> tuple[Expectation, ...]:
    """The expectations with their columns spelled as the table declares them, or an error naming the first
    column the table does not have."""
    from mvengine.names import did_you_mean

    declared = {c.lower(): c for c in columns}
    checked = []
    for e in expectations:
        for c in e.columns:
            if c.lower() not in declared:
                raise SqlError(
                    f"expectation {e.name} reads unknown column {c!r}",
                    file=file,
                    line=e.line,
                    col=e.col,
                    obj=obj,
                    hint=did_you_mean(c, columns, "columns"),
                )
        condition = e.condition
        if condition is not None:
            condition = condition.copy()
            for col in condition.find_all(exp.Column):
                col.set("this", exp.to_identifier(declared[col.name.lower()]))
                col.set("table", None)
        checked.append(replace(e, columns=tuple(declared[c.lower()] for c in e.columns), condition=condition))
    return tuple(checked)


def kept_rows(expectations: tuple[Expectation, ...]) -> exp.Expression | None:
    """The condition of the rows a table keeps: those no DROP ROW or QUARANTINE expectation fails (None when
    none drops). A predicate that is NULL passes, as a CHECK constraint's does."""
    conditions = [
        e.row_condition
        if e.kind == "not_null"
        else exp.Coalesce(this=e.row_condition.copy(), expressions=[exp.true()])
        for e in expectations
        if e.drops
    ]
    if not conditions:
        return None
    kept = exp.and_(*conditions)
    assert isinstance(kept, exp.Expression)
    return kept
