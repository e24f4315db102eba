"""Names of sources and views become path segments and SQL identifiers, so they are validated first.

A valid name is a plain identifier: a letter or underscore, then letters, digits or underscores, at most 128
characters. That rules out `..`, `/`, quotes, backticks, `;` and whitespace, so a name can never escape the
warehouse folder or a quoted identifier. Column names are not restricted; they are always quoted.
"""

from __future__ import annotations

import re

from mvengine.errors import InvalidNameError

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
# Columns the engine adds to the rows it produces; user names must not collide with them.
RESERVED_COLUMNS = frozenset({"_change_type", "_commit_version", "_commit_timestamp", "_table"})


def validate_name(name: str, kind: str = "name") -> str:
    """Return `name` if it is a safe object name, else raise InvalidNameError saying what is allowed."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidNameError(
            f"invalid {kind} {name!r}: names must start with a letter or underscore and contain only "
            "letters, digits and underscores (at most 128 characters)",
            hint="rename it, e.g. " + _suggest(name),
        )
    return name


def quote_identifier(name: str) -> str:
    """Quote any column or object name as a Spark SQL identifier (backticks, inner backticks doubled)."""
    return "`" + name.replace("`", "``") + "`"


def _suggest(name: object) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9_]", "_", str(name)).strip("_") or "my_table"
    if cleaned[0].isdigit():
        cleaned = "t_" + cleaned
    return cleaned[:128]
