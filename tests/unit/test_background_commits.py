"""The commits of a pipeline batch's views on threads (runtime/background_commits.py): a wait ends the commits
of the views asked for and of every view submitted before them, runs their batch lines in submission order, and
raises the first failure only after the others have ended."""

from __future__ import annotations

import threading

import pytest

from mvengine.runtime.background_commits import BackgroundCommits, CommitFailed


def test_a_wait_ends_the_views_asked_for_and_those_before_them_in_order():
    commits = BackgroundCommits(2)
    release = threading.Event()
    lines: list[str] = []
    try:
        commits.submit("a", release.wait, lambda: lines.append("a"))
        commits.submit("b", lambda: None, lambda: lines.append("b"))
        commits.submit("c", lambda: None, lambda: lines.append("c"))
        release.set()
        commits.wait(["b", "x"])  # (x: a source, never submitted)
        assert lines == ["a", "b"]  # a came first, so b's line waits for it
        commits.wait(["x"])
        assert lines == ["a", "b"]
        commits.wait()
        assert lines == ["a", "b", "c"]
    finally:
        commits.close()


def test_a_failed_commit_is_raised_as_its_views_after_the_others_end():
    commits = BackgroundCommits(2)
    ended: list[str] = []
    lines: list[str] = []

    def failing() -> None:
        raise OSError("disk full")

    def slow() -> None:
        threading.Event().wait(0.2)
        ended.append("c")

    try:
        commits.submit("a", lambda: None, lambda: lines.append("a"))
        commits.submit("b", failing, lambda: lines.append("b"))
        commits.submit("c", slow, lambda: lines.append("c"))
        with pytest.raises(CommitFailed) as failed:
            commits.wait()
        assert (failed.value.view, str(failed.value.error)) == ("b", "disk full")
        assert ended == ["c"]  # c's commit ended before the failure was raised
        assert lines == ["a"]  # the lines after the failure are not printed
        commits.wait()  # nothing left
    finally:
        commits.close()


def test_close_waits_for_every_commit_and_raises_nothing():
    commits = BackgroundCommits(1)
    ended: list[str] = []

    def failing() -> None:
        raise RuntimeError("stopped")

    commits.submit("a", failing, lambda: None)
    commits.submit("b", lambda: ended.append("b"), lambda: None)
    commits.close()
    assert ended == ["b"]
