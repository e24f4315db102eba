"""Names of sources and views become path segments and SQL identifiers, so they are validated first.

A valid name is a plain identifier: a letter or underscore, then letters, digits or underscores, at most 128
characters. That rules out `..`, `/`, quotes, backticks, `;` and whitespace, so a name can never escape the
warehouse folder or a quoted identifier. Column names are not restricted; they are always quoted.
"""

from __future__ import annotations

import difflib
import re
import unicodedata

from mvengine.errors import InvalidNameError

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
# Columns the engine adds to the rows it produces; user names must not collide with them.
RESERVED_COLUMNS = frozenset({"_change_type", "_commit_version", "_commit_timestamp", "_table"})
# The changelog's own columns after the view's (DESIGN.md §5), with their meaning (docs/reference/tables.md is
# made from it). No view column may take them, nor the weight of a change row (`_w`).
CHANGELOG_COLUMN_MEANINGS = {
    "_op": "`+I` (a key's first row, or a bag's new row), `-U` (a changed row's old values), `+U` (its new "
    "values), `-D` (a row that went away)",
    "_undo": "true for `-U` and `-D`: the row takes back what an earlier row said",
    "_mtime": "commit time of the input change that caused the row (the batch clock for a row a timer emits)",
    "_version": "the snapshot version the row belongs to",
    "_batch_id": "the batch that wrote it",
    "_emit_index": "revision of the key's row: 0 for its first `+I`, one more per update (0 in bags)",
    "_emit_timing": "`early`, `on_time` or `late` relative to the watermark, for a view with an event-time "
    "window; null otherwise",
}
CHANGELOG_COLUMNS = tuple(CHANGELOG_COLUMN_MEANINGS)
RESERVED_VIEW_COLUMNS = RESERVED_COLUMNS | frozenset(CHANGELOG_COLUMNS) | {"_w"}


# Spark SQL's reserved words under ANSI mode (its default): a table named so needs backticks in every query.
RESERVED_WORDS = frozenset(
    """
all and any as authorization both case cast check collate column constraint create cross current_date
current_time current_timestamp current_user distinct else end escape except false fetch filter for foreign
from full grant group having in inner intersect into is join lateral leading left natural not null offset on
only or order outer overlaps primary references right select session_user some table then time to trailing
true union unique unknown user using when where with
""".split()
)  # noqa: SIM905 (words read best as words)


def validate_name(name: str, kind: str = "name") -> str:
    """Return `name` if it is a safe object name, else raise InvalidNameError saying what is allowed."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidNameError(
            f"invalid {kind} {name!r}: names must start with a letter or underscore and contain only "
            "letters, digits and underscores (at most 128 characters)",
            hint="rename it, e.g. " + _suggest(name),
        )
    if name.lower() in RESERVED_WORDS:
        raise InvalidNameError(
            f"invalid {kind} {name!r}: it is a reserved word of Spark SQL, which every query "
            "would have to quote",
            hint=f"rename it, e.g. {name.lower()}_v",
        )
    return name


def quote_identifier(name: str) -> str:
    """Quote any column or object name as a Spark SQL identifier (backticks, inner backticks doubled)."""
    return "`" + name.replace("`", "``") + "`"


def did_you_mean(name: str, candidates: list[str], what: str) -> str:
    """A hint naming the closest candidate (names compare case-insensitively), or listing them all."""
    by_lower = {c.lower(): c for c in candidates}
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.6)
    if close:
        return f"did you mean {by_lower[close[0]]}?"
    if not candidates:
        return f"there are no {what}"
    shown = ", ".join(candidates[:12]) + (", ..." if len(candidates) > 12 else "")
    return f"{what} are: {shown}"


def _suggest(name: object) -> str:
    ascii_name = unicodedata.normalize("NFKD", str(name)).encode("ascii", "ignore").decode()
    cleaned = re.sub(r"[^A-Za-z0-9_]", "_", ascii_name).strip("_") or "my_table"
    if cleaned[0].isdigit():
        cleaned = "t_" + cleaned
    return cleaned[:128]
