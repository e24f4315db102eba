"""Stopping long-running commands cleanly: Ctrl-C or SIGTERM asks them to stop at the next safe point (after the
current batch); a second Ctrl-C stops at once."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def stop_on_signal(on_request: Callable[[], None] = lambda: None) -> Iterator[Callable[[], bool]]:
    """Within the block, SIGINT and SIGTERM no longer interrupt: they make the yielded callable return True
    (and call `on_request` once). The previous handlers come back after the block."""
    requested = False

    def request(_signum, _frame) -> None:
        nonlocal requested
        if requested:
            raise KeyboardInterrupt  # asked twice: stop now
        requested = True
        on_request()

    previous = {sig: signal.signal(sig, request) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield lambda: requested
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
