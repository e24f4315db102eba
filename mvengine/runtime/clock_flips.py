"""When the clock next lets a row into a temporal filter or out of it (plan/time_bounds.py), read from the
statistics of the inputs' files in their Delta logs (no Spark, no data file opened): what a refresh asks to
decide whether a view whose inputs did not move has rows to add or retract, and what `mv refresh --continuous`
waits for between the inputs' commits."""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
import pyarrow.compute as pc

from mvengine.incremental.key_filters import input_columns
from mvengine.plan.nodes import Filter
from mvengine.plan.time_bounds import clock_bounds
from mvengine.plan.view_plan import ViewPlan
from mvengine.storage.tables import TableRef

_ROUNDING = 1_000  # µs: a file's time statistics may be rounded to milliseconds


def next_flip(
    plan: ViewPlan, inputs: Mapping[str, TableRef], versions: Mapping[str, int], after: int
) -> int | None:
    """The earliest time past `after` (µs since the epoch: what NOW() read in the view's last batch) at which the
    clock can change whether some row of the inputs at `versions` passes one of the view's temporal filters, by
    the least and greatest time of each file; None when it never can (or the view has no temporal filter). A
    filter over a time the inputs do not hold as a column (a computed one) is due at once: the batch decides."""
    found: list[int] = []
    for node in plan.root.walk():
        if not isinstance(node, Filter):
            continue
        for bound in clock_bounds(node) or ():
            traced = input_columns(node.child, bound.column)
            if not traced:
                return after + 1
            name, column = traced[0]
            for low, high in _file_times(inputs[name], versions[name], column):
                if low is None or high is None:
                    return after + 1
                if high + bound.shift + bound.slack + _ROUNDING > after:
                    found.append(max(after + 1, low + bound.shift - bound.slack - _ROUNDING))
    return min(found, default=None)


def _file_times(ref: TableRef, version: int, column: str) -> list[tuple[int | None, int | None]]:
    """Each file's least and greatest value of TIMESTAMP `column`, in µs (None where it records none)."""
    actions = pa.table(ref.open(version=version).get_add_actions(flatten=True))
    if actions.num_rows == 0:
        return []
    ends = []
    for stat in (f"min.{column}", f"max.{column}"):
        if stat not in actions.column_names:
            return [(None, None)]
        times = actions.column(stat)
        if not pa.types.is_timestamp(times.type):
            return [(None, None)]
        micros = pc.cast(times, pa.timestamp("us", tz=times.type.tz))
        ends.append(pc.cast(micros, pa.int64()).to_pylist())
    return list(zip(*ends))
