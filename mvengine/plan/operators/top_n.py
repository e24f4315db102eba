"""TopN: the first N rows of each partition in an order (ROW_NUMBER/RANK/DENSE_RANK ... <= N, ORDER BY ... LIMIT N,
deduplication as N = 1). Per partition the rule keeps a prefix of the partition's rows in order — the current top
N and a buffer of the next candidates — and the partition's row count; a batch merges its changes into the
touched partitions' prefixes, and reads a partition again from the input only when deletes drain its prefix
below what the top N needs. It emits only rows that enter, leave or move in the top N.

Not append-only in general: a new row can push one out of the top N or take its place. It is when the input is
append-only, the function is ROW_NUMBER and the order starts with PROCTIME() ascending (Flink's keep-first
deduplication): a later row then never ranks before an earlier one.
"""

from __future__ import annotations

from sqlglot import exp

from mvengine.plan.nodes import TopN, show
from mvengine.plan.operators.base import Claim, Operator, no_reasons


def buffer_size(node: TopN, append_only: bool) -> int:
    """How many rows of each partition the state keeps beyond the top N: none over an append-only input (rows
    never leave), else as many again (at least 10), so that most deletes are absorbed without a read."""
    return 0 if append_only else max(node.limit, 10)


def append_only(node: TopN, claim: Claim) -> bool:
    if not claim(node.child) or node.function != "row_number" or not node.order:
        return False
    first = node.order[0]
    return (
        isinstance(first.this, exp.Column)
        and bool(first.this.meta.get("proctime"))
        and not first.args.get("desc")
    )


def state(node: TopN, claim: Claim, purged: bool) -> tuple[str, bool]:
    keep = node.limit + buffer_size(node, claim(node.child))
    where = (
        f"per partition ({', '.join(show(p, node.child.fields) for p in node.partition)})"
        if node.partition
        else "one partition"
    )
    rows = "its first row" if keep == 1 else f"its first {keep} rows in order"
    return f"{where}: {rows} and its row count", not node.partition


OPERATOR = Operator(TopN, True, True, append_only, state, no_reasons)
