"""Change sets as Z-sets (DESIGN.md §4): a DataFrame of rows plus an integer weight `_w` (+1 insert, -1 delete)
and `_mtime`, the commit time of the input change that caused the row (Sys.MTime)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import reduce
from typing import TypeVar

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from mvengine.names import quote_identifier

quote = quote_identifier  # column names as Spark's column parser needs them (the rules import it from here)

WEIGHT = "_w"
MTIME = "_mtime"

T = TypeVar("T")


def from_change_feed(df: DataFrame, columns: Sequence[str]) -> DataFrame:
    """Delta CDF rows as a Z-set: insert and update_postimage weigh +1, delete and update_preimage -1."""
    sign = F.when(F.col("_change_type").isin("insert", "update_postimage"), F.lit(1)).otherwise(F.lit(-1))
    return df.select(
        *[F.col(quote(c)) for c in columns],
        sign.cast("long").alias(WEIGHT),
        F.col("_commit_timestamp").alias(MTIME),
    )


def inserts(df: DataFrame, mtime: Column) -> DataFrame:
    """Every row of a table as an insert (how a view starts: everything is new)."""
    return df.select("*", F.lit(1).cast("long").alias(WEIGHT), mtime.alias(MTIME))


def consolidate(df: DataFrame, columns: Sequence[str]) -> DataFrame:
    """Equal rows summed into one with their net weight; rows whose weight cancels out are gone."""
    return (
        df.groupBy(*[F.col(quote(c)) for c in columns])
        .agg(F.sum(WEIGHT).alias(WEIGHT), F.max(MTIME).alias(MTIME))
        .where(F.col(WEIGHT) != 0)
    )


def null_safe_equal(left: DataFrame, right: DataFrame, columns: Sequence[str]) -> Column:
    """The join condition `left.c <=> right.c` over `columns` (NULL keys match NULL keys); true when empty."""
    if not columns:
        return F.lit(True)
    return reduce(lambda a, b: a & b, [left[quote(c)].eqNullSafe(right[quote(c)]) for c in columns])


class ReadOnDemand(Mapping[str, T]):
    """Inputs' rows as inserts, by input name, each read once and only when a rule asks for it: the changes of
    the batch over which a subtree gives its rows before the batch (`as_before`, in Spark and on the driver)."""

    def __init__(self, names: Iterable[str], read: Callable[[str], T]) -> None:
        self._names, self._reader = list(names), read
        self._read: dict[str, T] = {}

    def __getitem__(self, name: str) -> T:
        if name not in self._names:
            raise KeyError(name)
        if name not in self._read:
            self._read[name] = self._reader(name)
        return self._read[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)
