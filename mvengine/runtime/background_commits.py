"""A pipeline batch's view commits, run on threads while the batch computes the views after them.

A batch computed on the driver spends most of its time committing: three to five Delta commits a view
(benchmarks/README.md, "Issue 39"), each in delta-rs, which releases the GIL while it writes. The views of a
batch are computed one after the other in DAG order; a view's commits (runtime/commit.py, in their order) go to
a thread of their own, and the next view is computed meanwhile. A view waits for the commits of the views it
reads before it starts, so it finds them as a batch that committed them one by one leaves them; views that do
not read each other commit side by side. The batch ends when every commit has: a failure is raised then, or
as soon as a view that waits for it would start, as the failure of the view whose commit failed. Only writes of
Arrow tables go to a thread (no Spark job runs off the main thread), and each view's batch line is reported
after its commits, in the order the views were computed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass


class CommitFailed(Exception):
    """A view's commits, run on a thread, failed with `error`."""

    def __init__(self, view: str, error: BaseException) -> None:
        super().__init__(view)
        self.view = view
        self.error = error


@dataclass
class _Commit:
    view: str
    done: Future[None]
    then: Callable[[], None]  # on the caller's thread, once committed (the batch line)


class BackgroundCommits:
    def __init__(self, threads: int) -> None:
        self._pool = ThreadPoolExecutor(max(threads, 1), thread_name_prefix="mvengine-commit")
        self._pending: list[_Commit] = []

    def submit(self, view: str, commit: Callable[[], None], then: Callable[[], None]) -> None:
        """Run the view's `commit` on a thread, and `then` on the caller's once it is done."""
        self._pending.append(_Commit(view, self._pool.submit(commit), then))

    def wait(self, views: Iterable[str] | None = None) -> None:
        """Wait for the commits of `views` (None: all) and for every commit submitted before theirs, so that
        the batch lines keep their order. Raises CommitFailed for the first of them that failed, after the
        others have ended."""
        wanted = None if views is None else set(views)
        last = max((i for i, c in enumerate(self._pending) if wanted is None or c.view in wanted), default=-1)
        ending, self._pending = self._pending[: last + 1], self._pending[last + 1 :]
        failed: CommitFailed | None = None
        for commit in ending:
            error = commit.done.exception()
            if error is not None:
                failed = failed or CommitFailed(commit.view, error)
            elif failed is None:
                commit.then()
        if failed is not None:
            raise failed

    def close(self) -> None:
        """Wait for every commit still running, raising nothing (the batch already failed), and end the
        threads."""
        for commit in self._pending:
            commit.done.exception()
        self._pending = []
        self._pool.shutdown(wait=True)
