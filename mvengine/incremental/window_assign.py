"""Window assignment is linear: a change row of the input is the same change of each window its event time falls
in, so the delta of the windowed rows is the windowed delta, with no state. Rows later than the view's allowed
lateness are set aside first (incremental/lateness.py).

A tumbling window of size s (offset o) holding time t starts at t - ((t - o) mod s); a hopping window of size s
every d holds t in the ceil(s / d) windows starting at t - ((t - o) mod d) - k·d (k = 0, 1, ...) that still end
after t. A row whose time is NULL is in no window. These are Spark's `window()` semantics, which the Spark engine
calls and the driver's reproduces (tests/spark/test_refresh_windows.py checks both against Spark's batch SQL).
Session windows are not linear (a row can merge two sessions): their rule is session_window.py.
"""

from __future__ import annotations

from typing import TypeVar

from mvengine.incremental.engine import Engine
from mvengine.plan.nodes import WindowAssign

NODE = WindowAssign  # the plan node type this module maintains (plan/operators/window.py)

R = TypeVar("R")


def rule(node: WindowAssign, engine: Engine[R]) -> R:
    return engine.windows(engine.on_time(engine.child(node.child), node), node)
