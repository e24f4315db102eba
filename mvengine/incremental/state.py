"""The state a view's delta rules keep: Delta tables under the view's `_state/` folder.

Every read is of the table as it was before the batch (time travel), so a batch replayed after a crash
computes exactly what its first attempt computed, whatever that attempt managed to commit. Writes are staged
and committed together after the batch's result is known, each carrying the batch's application transaction.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from mvengine.config import join_uri
from mvengine.incremental.driver import match
from mvengine.incremental.purge import Purge
from mvengine.incremental.zset import null_safe_equal, quote
from mvengine.policy import DEFAULT_POLICY, ExecutionPolicy
from mvengine.storage.api import Bounds, arrow_schema, merge_into, read_arrow, read_table, write_table
from mvengine.storage.tables import TableRef, table_rows, version_before

TOUCHED = "_touched"  # µs: the batch clock when a key's state last changed (views with a state_ttl)


@dataclass
class StateStore:
    spark: SparkSession
    folder: str
    storage_options: dict[str, str]
    app_id: str
    batch_id: int
    fresh: bool  # the view is (re)built: its operators start from no state...
    persistent: frozenset[str] = frozenset()  # ...except these view-level tables, which carry on
    on_driver: bool = False  # the batch is small: writes go from the driver (see storage.api.write_table)
    policy: ExecutionPolicy = DEFAULT_POLICY
    # Table name prefix → a condition on its rows (`t."col"`) that the batch's MERGE into it deletes: the rows of
    # windows past the view's allowed lateness (runtime/event_time.purge_conditions).
    purge: dict[str, Purge] = field(default_factory=dict)
    # The view allows a lateness: the rows a session window or window function keeps carry the time from which
    # no row to come needs them, by which they leave state (incremental/partition_rows.py, NEEDED_UNTIL).
    allows_lateness: bool = False
    # Custom commit metadata of every write: the batch's clock, in a view with a state_ttl, whose expiries
    # depend on it (a batch replayed after its state committed takes that clock: runtime/expiry.py).
    metadata: dict[str, str] = field(default_factory=dict)
    _pending: list[tuple[str, DataFrame, tuple[str, ...], str | None]] = field(default_factory=list)
    # The driver's reads of each state table: its version before the batch (None: none to read) and schema,
    # found once a batch (until its commit): each costs a look at the table's log, and a batch's rules and
    # changelog read a table several times.
    _versions: dict[str, int | None] = field(default_factory=dict)
    _schemas: dict[str, pa.Schema | None] = field(default_factory=dict)

    def ref(self, name: str) -> TableRef:
        return TableRef(join_uri(self.folder, name), self.storage_options, name)

    def read(self, name: str, template: DataFrame) -> DataFrame:
        """The whole state table before this batch; `template` (empty, with the table's columns) if none."""
        if not self.holds(name):
            return template.limit(0)
        ref = self.ref(name)
        return read_table(self.spark, ref, version=version_before(ref, self.app_id, self.batch_id))

    def read_for(
        self, name: str, template: DataFrame, keys: DataFrame, key_columns: Sequence[str]
    ) -> DataFrame:
        """The rows of state table `name` whose key is one of `keys` (NULL matches NULL; all, without keys)."""
        state = self.read_candidates(name, template, keys, key_columns)
        if not (key_columns and self.holds(name)):
            return state
        keys = keys.select(*[quote(c) for c in key_columns]).distinct()
        s, k = state.alias("s"), keys.alias("k")
        return s.join(k, null_safe_equal(s, k, key_columns), "left_semi")

    def read_candidates(
        self, name: str, template: DataFrame, keys: DataFrame, key_columns: Sequence[str]
    ) -> DataFrame:
        """The rows of state table `name` that may match `keys`: a superset, narrowed by a pushed-down filter
        on the first key column when the table is large, for callers that join it to the keys themselves."""
        state = self.read(name, template)
        if not (key_columns and self.holds(name)):
            return state
        if _size_bytes(self.ref(name)) < self.policy.state_pushdown_min_bytes:
            return state
        column = F.col(quote(key_columns[0]))
        # One Spark job tells the range and about how many keys there are; listing them costs a second one,
        # run only when they are few enough to list.
        low, high, nulls, estimate = keys.agg(
            F.min(column), F.max(column), F.count_if(column.isNull()), F.approx_count_distinct(column)
        ).collect()[0]
        values = []
        most = self.policy.state_pushdown_keys
        if estimate <= most:
            values = [r[0] for r in keys.select(column).distinct().limit(most + 1).collect()]
        if estimate > most or len(values) > most:
            narrow = column.between(low, high) if low is not None else F.lit(False)
        else:
            narrow = column.isin([v for v in values if v is not None]) if low is not None else F.lit(False)
        return state.where(narrow | column.isNull() if nulls else narrow)

    # -- the driver's reads (incremental/driver.py), with delta-rs ------------------------------------------

    def _version(self, name: str) -> int | None:
        """The state table's version before the batch; None when it does not exist or starts empty."""
        if name not in self._versions:
            has = self.holds(name)
            self._versions[name] = version_before(self.ref(name), self.app_id, self.batch_id) if has else None
        return self._versions[name]

    def schema(self, name: str) -> pa.Schema | None:
        if name not in self._schemas:
            version = self._version(name)
            self._schemas[name] = (
                None if version is None else arrow_schema(self.ref(name).open(version=version))
            )
        return self._schemas[name]

    def read_all(self, name: str) -> pa.Table | None:
        version = self._version(name)
        return None if version is None else read_arrow(self.ref(name), version=version)

    def rows_before(self, name: str, column: str, before: int) -> int:
        """How many rows the files of state table `name` hold whose `column` is all before `before` (µs), by the
        statistics of its log (a file without them counts none)."""
        version = self._version(name)
        if version is None:
            return 0
        actions = pa.table(self.ref(name).open(version=version).get_add_actions(flatten=True))
        highest = f"max.{column}"
        if not actions.num_rows or highest not in actions.column_names:
            return 0
        behind = pc.fill_null(pc.less(pc.cast(actions.column(highest), pa.int64()), before), False)
        return int(pc.sum(actions.column("num_records").filter(behind)).as_py() or 0)

    def read_within(self, name: str, within: Bounds) -> pa.Table | None:
        """At least the state rows whose column is within the bounds (the files and row groups whose statistics
        exclude them are skipped); None as `lookup`."""
        version = self._version(name)
        return None if version is None else read_arrow(self.ref(name), version=version, within=within)

    def lookup(self, name: str, rows: pa.Table, keys: Sequence[str]) -> pa.Table | None:
        """The state rows whose keys equal (NULL matching NULL) those of `rows`: the files are narrowed by the
        first key column's values (delta-rs skips files and row groups by their statistics), the rows matched
        exactly on the driver."""
        version = self._version(name)
        if version is None:
            return None
        found = read_arrow(self.ref(name), version=version, where=(keys[0], rows.column(keys[0])))
        matched, _ = match(
            [found.column(k) for k in keys], [rows.column(k) for k in keys], "left semi", null_safe=True
        )
        return found.take(matched)

    # -- keys that expire (a view's state_ttl) ----------------------------------------------------------------

    def expired(self, name: str, through: int) -> DataFrame | None:
        """The rows of state table `name` last touched (its `_touched` column) at or before `through`, µs; None
        when its files' statistics show none."""
        if not self._touched_through(name, through):
            return None
        rows = read_table(self.spark, self.ref(name), version=self._version(name))
        return rows.where(F.col(TOUCHED) <= through)

    def expired_arrow(self, name: str, through: int) -> pa.Table | None:
        """`expired`, read on the driver: the files and row groups whose statistics exclude it are skipped."""
        if not self._touched_through(name, through):
            return None
        version = self._version(name)
        low = pa.scalar(-(2**63), pa.int64())
        rows = read_arrow(
            self.ref(name), version=version, within=(TOUCHED, low, pa.scalar(through, pa.int64()))
        )
        return rows.filter(pc.less_equal(rows.column(TOUCHED), through))

    def _touched_through(self, name: str, through: int) -> bool:
        """Whether a row of the table may have been last touched at or before `through`, by the least
        `_touched` its files' statistics record (the log alone: most batches expire nothing)."""
        version = self._version(name)
        if version is None:
            return False
        actions = pa.table(self.ref(name).open(version=version).get_add_actions(flatten=True))
        column = f"min.{TOUCHED}"
        if not actions.num_rows:
            return False
        if column not in actions.column_names or actions.column(column).null_count:
            return True  # (files without statistics: read to know)
        return bool(pc.min(actions.column(column)).as_py() <= through)

    def holds(self, name: str) -> bool:
        """Whether the batch reads (and merges into) rows of state table `name`: it exists and does not start
        empty (the view is rebuilt, and the table is not one that carries on)."""
        return not (self.fresh and name not in self.persistent) and self.ref(name).exists()

    def stage(
        self, name: str, rows: DataFrame, keys: Sequence[str], delete_column: str | None = None
    ) -> None:
        """Queue the new rows of the given keys (and, where `delete_column` is true, their removal). Without
        keys (a table of one row: a global aggregate's), the rows replace the whole table: staging none
        empties it."""
        self._pending.append((name, rows, tuple(keys), delete_column))

    def commit(self, names: set[str] | None = None) -> None:
        """Write the staged tables (only `names`, when given), each once per batch. Tables staged in Arrow are
        written side by side: delta-rs releases the GIL while it writes, and a view of several aggregates
        keeps several tables (a batch replayed after a crash finds any of them committed, whatever the order)."""
        self._versions.clear()
        self._schemas.clear()
        chosen = [p for p in self._pending if names is None or p[0] in names]
        if len(chosen) > 1 and all(isinstance(rows, pa.Table) for _, rows, _, _ in chosen):
            with ThreadPoolExecutor(min(len(chosen), os.cpu_count() or 1)) as pool:
                for written in [pool.submit(self._write, *p) for p in chosen]:
                    written.result()
        else:
            for p in chosen:
                self._write(*p)
        self._pending = [p for p in self._pending if p not in chosen]

    def _write(
        self, name: str, rows: DataFrame | pa.Table, keys: tuple[str, ...], delete_column: str | None
    ) -> None:
        txn = (self.app_id, self.batch_id)
        ref = self.ref(name)
        if not (keys and self.holds(name)):
            # A new table, or one of a single row (an aggregate without GROUP BY): written whole.
            kept = _without_deleted(rows, delete_column)
            write_table(
                kept,
                ref,
                mode="overwrite",
                metadata=self.metadata or None,
                txn=txn,
                on_driver=self.on_driver,
                cluster_by=keys,
            )
            return
        purge = next(
            (
                p
                for prefix, p in self.purge.items()
                if name == prefix or (name.startswith(prefix) and name[len(prefix) :].isdigit())
            ),
            None,
        )
        merge_into(
            rows,
            ref,
            keys,
            delete_column=delete_column,
            metadata=self.metadata or None,
            txn=txn,
            on_driver=self.on_driver,
            purge=purge.condition() if purge is not None and self._purges(ref, purge) else None,
        )

    def _purges(self, ref: TableRef, purge: Purge) -> bool:
        """Whether this batch's MERGE into the table drops its rows past the lateness: when a file may hold one,
        and the table is small enough to read whole every batch or this is its batch to (policy.purge_scan_rows;
        by batch id, so that a replay decides as its first attempt). Rows dropped later are dropped all the
        same: nothing can change them any more."""
        if not purge.may_match(ref):
            return False
        every = table_rows(ref, ref.open().version()) // self.policy.purge_scan_rows
        return every <= 1 or self.batch_id % every == 0

    @property
    def staged(self) -> set[str]:
        return {p[0] for p in self._pending}

    @property
    def staged_in_arrow(self) -> bool:
        """Whether every staged table is an Arrow table (its writes run no Spark job)."""
        return all(isinstance(p[1], pa.Table) for p in self._pending)


def _without_deleted(rows: DataFrame | pa.Table, delete_column: str | None) -> DataFrame | pa.Table:
    if delete_column is None:
        return rows
    if isinstance(rows, pa.Table):
        return rows.filter(pc.invert(rows.column(delete_column))).drop_columns([delete_column])
    return rows.where(~F.col(quote(delete_column))).drop(delete_column)


def _size_bytes(ref: TableRef) -> int:
    sizes = pa.table(ref.open().get_add_actions()).column("size_bytes")
    return int(pa.compute.sum(sizes).as_py() or 0)
