"""Crash points, for the crash-matrix test (tests/system/test_refresh_crash.py): with MVENGINE_CRASH_AT set to
`<view>:<commit>:<before|after>` (commit: state, snapshot, key revisions or changelog), the process kills itself
with SIGKILL (no `finally`, no flush: as a power cut would) at that boundary of the first batch of the view
that reaches it. Two more points are not a view's: `spark:start:after` (Spark has just started: in a batch
that needs it, with the lock held) and `continuous:batch:after` (a batch of `--continuous` has committed every
view, and Spark has not yet recorded the batch in its checkpoint). Unset, a boundary costs one comparison."""

from __future__ import annotations

import os
import signal

CRASH_AT = os.environ.get("MVENGINE_CRASH_AT") or None
COMMITS = ("state", "snapshot", "key revisions", "changelog")
PROCESS_POINTS = ("spark:start:after", "continuous:batch:after")


def boundary(view: str, commit: str, when: str) -> None:
    if CRASH_AT is not None and CRASH_AT == f"{view}:{commit}:{when}":
        os.kill(os.getpid(), signal.SIGKILL)
