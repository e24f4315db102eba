"""Reading views/*.sql into statements that remember their file and line.

sqlglot's Spark dialect does not know Flink's `WATERMARK FOR col AS expr` clause of CREATE TABLE, so it is
cut out of the text (blanked, so line numbers stay right) and kept beside the statement; so are the
`CONSTRAINT ... EXPECT` elements of sources and views (sql/expectations.py) and a view's `EMIT` clause, and the
window syntax it cannot parse is rewritten in place (sql/time_syntax.py). Each statement is parsed padded to its
place in the file, so the line and column sqlglot records on identifiers are the file's own.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Token, TokenType

from mvengine.errors import SqlError
from mvengine.names import did_you_mean
from mvengine.sql.expectations import Expectation, cut_expectations
from mvengine.sql.time_syntax import Emit, cut_emit, rewrite_event_time

DIALECT = "spark"
# sqlglot logs a warning for each statement it reads as an opaque command; mvengine says what is wrong instead.
logging.getLogger("sqlglot").setLevel(logging.ERROR)
MAX_FILE_BYTES = 1 << 20  # far above any real view file; a larger one is a mistake (or data), not SQL


@dataclass(frozen=True)
class Watermark:
    column: str
    expression: str  # e.g. "ts - INTERVAL '5' SECOND"
    line: int
    delay: int = 0  # microseconds the watermark stays behind the largest event time (sql/sources.py reads it)


@dataclass(frozen=True)
class Statement:
    file: str
    line: int
    text: str
    tree: exp.Expr  # sqlglot.parse_one gives an Expr
    watermark: Watermark | None = None
    emit: Emit | None = None
    expectations: tuple[Expectation, ...] = ()


def read_sql_files(views_dir: Path, root: Path | None = None) -> list[Statement]:
    """All statements of every *.sql file under `views_dir` (recursively), in path order.

    Files are named relative to `root` (the project folder) in statements and errors, when they are inside it.
    """
    statements: list[Statement] = []
    for path in sorted(views_dir.rglob("*.sql")):
        name = str(path.relative_to(root)) if root and path.is_relative_to(root) else str(path)
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise SqlError(
                f"the file is {size / 2**20:.1f} MiB: a view file may hold at most "
                f"{MAX_FILE_BYTES // 2**20} MiB of SQL",
                file=name,
                hint="declare fewer, shorter statements per file (or move data out of the SQL)",
            )
        data = path.read_bytes()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            line = data.count(b"\n", 0, e.start) + 1
            raise SqlError(
                f"not UTF-8 text (byte {e.start} cannot be decoded)",
                file=name,
                line=line,
                hint="save the file as UTF-8",
            ) from None
        statements.extend(split_statements(text, name))
    return statements


def split_statements(text: str, file: str) -> list[Statement]:
    try:
        tokens = sqlglot.tokenize(text, read=DIALECT)
    except TokenError as e:
        raise SqlError(f"cannot read SQL: {e}", file=file) from None
    chunks: list[list[Token]] = [[]]
    for tok in tokens:
        if tok.token_type == TokenType.SEMICOLON:
            chunks.append([])
        else:
            chunks[-1].append(tok)
    statements = []
    for chunk in (c for c in chunks if c):
        start, end = chunk[0].start, chunk[-1].end + 1
        body = text[start:end]
        first_line = chunk[0].line
        body, expectations = cut_expectations(body, chunk, start, file)
        body, watermark = _cut_watermark(body, chunk, start, file)
        body, emit = cut_emit(body, chunk, start, file)
        body = rewrite_event_time(body, chunk, start)
        # Pad to the statement's place in the file, so positions in the tree and in errors are the file's.
        padding = "\n" * (first_line - 1) + " " * (start - (text.rfind("\n", 0, start) + 1))
        try:
            tree = sqlglot.parse_one(padding + body, read=DIALECT)
        except ParseError as e:
            raise _located(e, text, file, first_line) from None
        if isinstance(tree, exp.Command):  # sqlglot gave up on the statement: find where in its query
            _check_view_query(chunk, text, file, first_line)
        statements.append(
            Statement(file, first_line, text[start:end], tree, watermark, emit, tuple(expectations))
        )
    return statements


def _located(e: ParseError, text: str, file: str, first_line: int) -> SqlError:
    """A syntax error at its line and column of the file, the line shown with a caret under the column."""
    err = e.errors[0] if e.errors else {}
    line = int(err.get("line", first_line))
    col, token = err.get("col"), (err.get("highlight") or "").strip()
    what = parse_error_text(err.get("description", str(e)))
    hint = None
    if token and what.startswith("Invalid expression / Unexpected token") and col:
        col = max(int(col) - len(token) + 1, 1)  # under the token's first character, not its last
        what = f"unexpected {token!r}"
        hint = "a comma may be missing before it"
        # A misspelled keyword is the token itself (FORM t), or the word before it, read as an alias (GRUOP BY).
        for word, at in [(token, col), *_word_before(text.splitlines()[line - 1], col)]:
            close = did_you_mean(word.upper(), list(_KEYWORDS), "keywords")
            if word.upper() not in _KEYWORDS and close.startswith("did you mean"):
                what, hint, col = f"unexpected {word!r}", close, at
                break
    return SqlError(
        f"syntax error: {what}",
        file=file,
        line=line,
        col=col,
        hint=hint,
        snippet=snippet(text, line, int(col) if col else None),
    )


def _word_before(line: str, col: int) -> list[tuple[str, int]]:
    """The word before column `col` of `line` and the column it starts at (none when there is none)."""
    m = re.search(r"(\w+)\s*$", line[: col - 1])
    return [(m.group(1), m.start(1) + 1)] if m else []


# The keywords a misspelling is compared with.
_KEYWORDS = (
    "SELECT",
    "FROM",
    "WHERE",
    "GROUP",
    "BY",
    "HAVING",
    "ORDER",
    "JOIN",
    "LEFT",
    "RIGHT",
    "FULL",
    "INNER",
    "OUTER",
    "ON",
    "USING",
    "UNION",
    "DISTINCT",
    "LIMIT",
    "WINDOW",
    "QUALIFY",
    "OVER",
    "PARTITION",
    "AS",
    "CASE",
    "WHEN",
    "THEN",
    "ELSE",
    "END",
    "EXISTS",
    "BETWEEN",
)


def _check_view_query(chunk: list[Token], text: str, file: str, first_line: int) -> None:
    """sqlglot reads a CREATE MATERIALIZED VIEW whose SELECT has a mistake (`FORM t`, `GRUOP BY`, a missing
    comma) as an opaque command, with no position: parse its query alone, at its place in the file, so that
    the error names the line and column where the query goes wrong."""
    words = [t.text.upper() for t in chunk[:3]]
    if words[:1] != ["CREATE"] or "VIEW" not in words and "MATERIALIZED" not in words:
        return
    depth = 0
    for i, tok in enumerate(chunk):
        depth += (tok.token_type == TokenType.L_PAREN) - (tok.token_type == TokenType.R_PAREN)
        if depth == 0 and tok.token_type == TokenType.ALIAS and i + 1 < len(chunk):
            start = chunk[i + 1].start
            padding = "\n" * (chunk[i + 1].line - 1) + " " * (start - (text.rfind("\n", 0, start) + 1))
            try:
                sqlglot.parse_one(padding + text[start : chunk[-1].end + 1], read=DIALECT)
            except ParseError as e:
                raise _located(e, text, file, first_line) from None
            return


def _cut_watermark(body: str, chunk: list[Token], offset: int, file: str) -> tuple[str, Watermark | None]:
    depth = 0
    for i, tok in enumerate(chunk):
        if tok.token_type == TokenType.L_PAREN:
            depth += 1
        elif tok.token_type == TokenType.R_PAREN:
            depth -= 1
        elif (
            depth == 1
            and tok.text.upper() == "WATERMARK"
            and i > 0
            and chunk[i - 1].token_type == TokenType.COMMA
        ):
            j, level = i, 1
            while j + 1 < len(chunk):
                nxt = chunk[j + 1]
                level += nxt.token_type == TokenType.L_PAREN
                level -= nxt.token_type == TokenType.R_PAREN
                if level == 0 or (level == 1 and nxt.token_type == TokenType.COMMA):
                    break
                j += 1
            clause = chunk[i : j + 1]
            if (
                len(clause) < 4
                or clause[1].token_type != TokenType.FOR
                or clause[3].token_type != TokenType.ALIAS
            ):
                raise SqlError(
                    "WATERMARK must read: WATERMARK FOR <column> AS <column> - INTERVAL 'n' <unit>",
                    file=file,
                    line=tok.line,
                    col=tok.col,
                )
            cut_from = chunk[i - 1].start - offset
            cut_to = clause[-1].end + 1 - offset
            expression = body[clause[4].start - offset : cut_to] if len(clause) > 4 else ""
            blank = "".join(c if c == "\n" else " " for c in body[cut_from:cut_to])
            return (
                body[:cut_from] + blank + body[cut_to:],
                Watermark(clause[2].text, expression.strip(), tok.line),
            )
    return body, None


# sqlglot's names of the expressions an error may leave incomplete, in SQL words (others: upper-cased).
_EXPRESSIONS = {
    "Mul": "*",
    "Div": "/",
    "Add": "+",
    "Sub": "-",
    "Mod": "%",
    "EQ": "=",
    "NEQ": "<>",
    "GT": ">",
    "GTE": ">=",
    "LT": "<",
    "LTE": "<=",
    "And": "AND",
    "Or": "OR",
    "Not": "NOT",
    "Paren": "( )",
    "Alias": "AS",
    "Cast": "CAST",
    "Join": "JOIN",
    "Group": "GROUP BY",
    "Order": "ORDER BY",
}


def parse_error_text(description: str) -> str:
    """sqlglot's parser messages, in SQL terms: "Required keyword: 'this' missing for <class '...Where'>"
    becomes "WHERE is incomplete"."""
    m = re.match(r"Required keyword: '\w+' missing for <class '[\w.]*?(\w+)'>", description)
    if not m:
        return description
    return f"{_EXPRESSIONS.get(m.group(1), m.group(1).upper())} is incomplete"


def snippet(text: str, line: int, col: int | None = None) -> str:
    """The line of `text` an error is on, numbered; with `col`, a caret under that column."""
    lines = text.splitlines()
    if not 0 < line <= len(lines):
        return ""
    shown = f"  {line} | {lines[line - 1]}"
    if col:
        shown += "\n" + " " * (len(f"  {line} | ") + col - 1) + "^"
    return shown
