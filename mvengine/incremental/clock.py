"""The clock a batch reads NOW() as: one time per batch, recorded by its snapshot commit, so that a temporal
filter's rows pass or fail as of that time (plan/time_bounds.py), in the batch and in any recomputation of it."""

from __future__ import annotations

from dataclasses import dataclass

from mvengine.plan.nodes import Filter, Node
from mvengine.plan.time_bounds import clock_bounds


@dataclass(frozen=True)
class Clock:
    now: int  # µs since the epoch: what NOW() reads in this batch
    before: int | None = None  # ...and read in the batch before (None: the view starts, or never read it)

    @property
    def moved(self) -> bool:
        return self.before is not None and self.before != self.now

    def as_before(self) -> Clock | None:
        """The clock of the view's rows before the batch: that batch's own."""
        return None if self.before is None else Clock(self.before)


def reads_clock(node: Node) -> bool:
    """Whether a temporal filter lies under `node` (its rows then move with the clock)."""
    return any(isinstance(n, Filter) and clock_bounds(n) is not None for n in node.walk())


def clock_moves(clock: Clock | None, node: Node) -> bool:
    """Whether `node`'s rows can change in a batch with this clock, with no input changed."""
    return clock is not None and clock.moved and reads_clock(node)
