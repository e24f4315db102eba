"""The clock a batch reads NOW() as: one time per batch, recorded by its snapshot commit, so that a temporal
filter's rows pass or fail as of that time (plan/time_bounds.py), in the batch and in any recomputation of it.
The same clock tells which keys of a view with a `state_ttl` were untouched for that long (they expire)."""

from __future__ import annotations

from dataclasses import dataclass

from mvengine.plan.nodes import Aggregate, Distinct, Filter, Node, Over, TopN
from mvengine.plan.time_bounds import clock_bounds


@dataclass(frozen=True)
class Clock:
    now: int  # µs since the epoch: what NOW() reads in this batch
    before: int | None = None  # ...and read in the batch before (None: the view starts, or never read it)
    state_ttl: int | None = None  # µs: the view's keys untouched for this long expire (None: they never do)

    @property
    def moved(self) -> bool:
        return self.before is not None and self.before != self.now

    @property
    def expire_through(self) -> int | None:
        """Keys last touched at or before this time (µs) expire in this batch; None: none do."""
        return None if self.state_ttl is None else self.now - self.state_ttl

    def as_before(self) -> Clock | None:
        """The clock of the view's rows before the batch: that batch's own."""
        return None if self.before is None else Clock(self.before)


def reads_clock(node: Node) -> bool:
    """Whether a temporal filter lies under `node` (its rows then move with the clock)."""
    return any(isinstance(n, Filter) and clock_bounds(n) is not None for n in node.walk())


def holds_expiring_state(node: Node) -> bool:
    """Whether the GROUP BY, DISTINCT, top-N, window function or session window whose keys a `state_ttl`
    expires lies under `node` (plan/view_plan.py allows no other state in such a view)."""
    return any(isinstance(n, (Aggregate, Distinct, TopN, Over)) for n in node.walk())


def clock_moves(clock: Clock | None, node: Node) -> bool:
    """Whether `node`'s rows can change in a batch with this clock, with no input changed: the clock passed
    rows of its temporal filters, or keys of its state may have expired."""
    if clock is None or not clock.moved:
        return False
    return reads_clock(node) or (clock.state_ttl is not None and holds_expiring_state(node))
