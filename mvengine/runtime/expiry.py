"""A view's state_ttl, read from its state table's log: when its next key expires (the refresh then has work
with no input moved, and `--continuous` wakes up for it), and the clock a batch's state was written with."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from mvengine.config import join_uri
from mvengine.incremental.clock import holds_expiring_state
from mvengine.incremental.state import TOUCHED
from mvengine.plan.nodes import Aggregate, Distinct, Over, SessionAggregate, TopN
from mvengine.plan.view_plan import ViewPlan
from mvengine.storage.tables import TableRef, commit_metadata, is_committed

CLOCK = "mvengine.clock"  # the state commit's metadata: the batch's clock


def expiring_table(plan: ViewPlan) -> str | None:
    """The state table whose `_touched` column says when the view's keys expire (None: no state_ttl): its
    GROUP BY's accumulators, its DISTINCT's rows, its top-N's partition counts, or the input rows its window
    function or session window keeps (incremental/aggregate.py, distinct.py, top_n.py, partition_rows.py)."""
    if plan.view.state_ttl is None or plan.strategy != "incremental" or not holds_expiring_state(plan.root):
        return None
    for i, node in enumerate(plan.root.walk()):
        if isinstance(node, (Over, SessionAggregate)):
            return f"n{i}_rows"
        if isinstance(node, Aggregate):
            return f"n{i}_acc"
        if isinstance(node, Distinct):
            return f"n{i}_rows"
        if isinstance(node, TopN):
            return f"n{i}_count"
    return None


def next_expiry(plan: ViewPlan, state_folder: str, storage_options: dict[str, str]) -> int | None:
    """When (µs since the epoch) the view's least recently touched key expires; None when it holds none."""
    name = expiring_table(plan)
    if name is None:
        return None
    ref = TableRef(join_uri(state_folder, name), storage_options, name)
    if not ref.exists():
        return None
    actions = pa.table(ref.open().get_add_actions(flatten=True))
    column = f"min.{TOUCHED}"
    if not actions.num_rows or column not in actions.column_names:
        return None
    earliest = pc.min(actions.column(column)).as_py()
    return None if earliest is None else int(earliest) + (plan.view.state_ttl or 0)


def clock_metadata(plan: ViewPlan, now: int | None) -> dict[str, str]:
    """The metadata a batch's state writes carry: its clock, in a view with a state_ttl."""
    return {} if expiring_table(plan) is None or now is None else {CLOCK: str(now)}


def committed_clock(
    plan: ViewPlan, state_folder: str, storage_options: dict[str, str], app_id: str, batch_id: int
) -> int | None:
    """The clock a first attempt of this batch wrote the view's state with, when its state committed (None:
    it did not, or the view has no state_ttl): the replay must expire exactly the keys that attempt dropped."""
    name = expiring_table(plan)
    if name is None:
        return None
    ref = TableRef(join_uri(state_folder, name), storage_options, name)
    if not is_committed(ref, app_id, batch_id):
        return None
    dt = ref.open()
    value = commit_metadata(dt, dt.version()).get(CLOCK)
    return None if value is None else int(value)
