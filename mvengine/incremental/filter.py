"""Filter is linear: the changes that pass the predicate are the filter's changes.

A temporal filter (plan/time_bounds.py) reads NOW() as the batch's clock, so its rows also change when only the
clock moves: σ₁(In₁) − σ₀(In₀) = σ₁(ΔIn) + (σ₁ − σ₀)(In₀), where σ₀ and σ₁ are the predicate at the clock of
the batch before and of this one. The second term holds the rows of In₀ that the predicate now passes and did not
(inserted) or passed and now does not (deleted); only rows whose time the clock passed between the two batches
can be among them, and those are read by their time (Engine.before with a range), one range per comparison with
the clock, each range without the rows of those before it (a row is counted once). The filter keeps no state."""

from __future__ import annotations

from typing import TypeVar

from sqlglot import exp

from mvengine.incremental.engine import Engine
from mvengine.incremental.zset import MTIME, WEIGHT
from mvengine.plan.nodes import Filter
from mvengine.plan.time_bounds import at_clock, clock_bounds, instant

NODE = Filter  # the plan node type this module maintains (plan/operators/filter.py)

R = TypeVar("R")


def rule(node: Filter, engine: Engine[R]) -> R:
    clock = engine.clock()
    bounds = clock_bounds(node)
    if bounds is None or clock is None:
        return engine.mask(engine.child(node.child), node.child, node.predicate)
    passes = at_clock(node.predicate, clock.now)
    changes = engine.mask(engine.child(node.child), node.child, passes)
    if clock.before is None or not clock.moved:
        return changes
    passed = at_clock(node.predicate, clock.before)
    entered = exp.and_(passes, exp.not_(_true(passed)))
    left = exp.and_(passed, exp.not_(_true(passes)))
    names = [f"c{i}" for i in range(len(node.child.fields))]
    parts, read = [changes], list[exp.Expression]()
    for bound in bounds:
        low, high = bound.flipping(min(clock.before, clock.now), max(clock.before, clock.now))
        rows = engine.before(node.child, [], [], within=(bound.column, low, high))
        if rows is None:
            break
        here = exp.Between(this=bound.column.copy(), low=instant(low), high=instant(high))
        only = exp.and_(here, *[exp.not_(_true(r)) for r in read])
        read.append(here)
        for condition, sign in ((entered, ""), (left, "-")):
            flipped = engine.named(
                engine.mask(rows, node.child, exp.and_(only, condition).assert_is(exp.Expression)),
                node.child,
                names,
            )
            stamped: dict[str, str | exp.Expression] = {WEIGHT: f"{sign}{WEIGHT}", MTIME: instant(clock.now)}
            parts.append(engine.output(engine.compute(flipped, stamped), names))
    return engine.concat(parts)


def _true(condition: exp.Expression) -> exp.Expression:
    """Whether `condition` is true (not false, not NULL)."""
    return exp.Coalesce(this=exp.paren(condition), expressions=[exp.false()])
