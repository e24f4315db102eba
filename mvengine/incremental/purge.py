"""What a state table loses to the watermark: the rows its batch's MERGE deletes beside the staged ones (the
windows, sessions and window-function rows past a view's allowed lateness: runtime/event_time.purge_conditions),
and whether its files may hold any, by the table's log."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from mvengine.storage.tables import TableRef


@dataclass(frozen=True)
class Purge:
    """The rows of a state table its batch's MERGE deletes beside the staged ones: those whose `column`, as a
    BIGINT (µs for a timestamp), is at most `at_most`, and with `nulls` those where it is NULL."""

    column: str
    at_most: int
    nulls: bool = False

    def condition(self) -> str:
        """As delta-rs's MERGE takes it, over the target's rows (`t`)."""
        column = 't."' + self.column.replace('"', '""') + '"'
        at_most = f"CAST({column} AS BIGINT) <= {self.at_most}"
        return f"({column} IS NULL OR {at_most})" if self.nulls else at_most

    def may_match(self, ref: TableRef) -> bool:
        """Whether a file of the table may hold such a row, by its log's statistics (a file without them may).
        A MERGE that deletes rows it is not given reads every file of the table: a batch that can delete
        none is spared that."""
        actions = pa.table(ref.open().get_add_actions(flatten=True))
        least, nulls = f"min.{self.column}", f"null_count.{self.column}"
        if not actions.num_rows:
            return False
        if least not in actions.column_names or actions.column(least).null_count:
            return True
        values = actions.column(least)
        if pa.types.is_timestamp(values.type):
            values = pc.cast(pc.cast(values, pa.timestamp("us", values.type.tz)), pa.int64())
        if pc.min(values).as_py() <= self.at_most:
            return True
        if not self.nulls:
            return False
        return nulls not in actions.column_names or (pc.sum(actions.column(nulls)).as_py() or 0) > 0
