"""The rewrites of a bound plan, in the order they run: each a `Node → Node` pass over the whole tree.

(The join and decorrelation rewrites still run inside binding, where the scopes they need are: plan/binder.py.)
"""

from __future__ import annotations

from collections.abc import Callable
from functools import reduce

from mvengine.plan.nodes import Node
from mvengine.plan.rewrites.over import over_windows
from mvengine.plan.rewrites.top_n import top_n

# top_n first: a ROW_NUMBER() filtered to its first rows becomes a TopN before the OVER windows left are read.
PASSES: tuple[Callable[[Node], Node], ...] = (top_n, over_windows)


def rewritten(root: Node) -> Node:
    """The plan after every pass."""
    return reduce(lambda node, rewrite: rewrite(node), PASSES, root)
