"""Crash points, for the crash-matrix test (tests/system/test_refresh_crash.py): with MVENGINE_CRASH_AT set to
`<view>:<commit>:<before|after>` (commit: state, snapshot, key revisions or changelog), the process kills itself
with SIGKILL (no `finally`, no flush: as a power cut would) at that boundary of the first batch of the view
that reaches it. Unset, a boundary costs one comparison."""

from __future__ import annotations

import os
import signal

CRASH_AT = os.environ.get("MVENGINE_CRASH_AT") or None
COMMITS = ("state", "snapshot", "key revisions", "changelog")


def boundary(view: str, commit: str, when: str) -> None:
    if CRASH_AT is not None and CRASH_AT == f"{view}:{commit}:{when}":
        os.kill(os.getpid(), signal.SIGKILL)
