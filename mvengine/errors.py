"""Errors a user can cause. The CLI prints any MvError as one `Error:` line (plus a hint), never a traceback.

Each error says where the problem is (a file and line, or a table and path) and what to do about it.
"""

from __future__ import annotations


class MvError(Exception):
    """Root of every error caused by the user's SQL, configuration, data or paths."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class ConfigError(MvError):
    """A problem in conf/mvengine.toml or in the project's layout."""

    def __init__(
        self, message: str, *, file: str | None = None, line: int | None = None, hint: str | None = None
    ) -> None:
        where = f"{file}:{line}: " if file and line else (f"{file}: " if file else "")
        super().__init__(f"{where}{message}", hint=hint)
        self.file = file
        self.line = line


class SqlError(MvError):
    """A problem in a view file: syntax, an unknown name, an unsupported construct."""

    def __init__(
        self,
        message: str,
        *,
        file: str,
        line: int | None = None,
        col: int | None = None,
        obj: str | None = None,
        snippet: str | None = None,
        hint: str | None = None,
    ) -> None:
        where = file + (f":{line}" if line else "") + (f":{col}" if line and col else "")
        what = f" {obj}:" if obj else ""
        text = f"{where}:{what} {message}"
        if snippet:
            text += "\n" + snippet
        super().__init__(text, hint=hint)
        self.file, self.line, self.col, self.obj = file, line, col, obj


class InvalidNameError(MvError):
    """A source, view or column name that cannot safely become a path segment or an identifier."""


class StorageError(MvError):
    """A Delta table that cannot be read or written as asked."""


class CdfDisabledError(StorageError):
    """An input table without the change data feed, which incremental maintenance needs."""


class KeyWrittenTwice(StorageError):
    """A write that was to check its rows' key unique (storage.api.write_table's `unique`) met a key twice, and
    committed nothing. `shown`: the key's values."""

    def __init__(self, table: str, shown: str) -> None:
        super().__init__(f"cannot write {table}: its key occurs twice ({shown})")
        self.shown = shown


class DuplicateKeyError(MvError):
    """A batch with two rows for one key of a keyed view: an input broke its declared PRIMARY KEY (NOT
    ENFORCED). The refresh replaces it with an error that names the source and its duplicated key."""

    def __init__(self, view: str, shown: str) -> None:
        super().__init__(
            f"view {view}: its key is not unique in this batch ({shown})",
            hint="a source's PRIMARY KEY is NOT ENFORCED: remove the duplicate rows from the source, "
            "or drop the PRIMARY KEY from its CREATE TABLE",
        )


class UnsupportedError(MvError):
    """Valid input that mvengine does not handle (yet); the message says what instead."""
