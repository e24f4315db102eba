"""The step a refresh takes for a view (runtime/steps.py `decide`), as a table: from the view's plan facts, its
last snapshot commit and the batch's cut, without Spark or a table on disk."""

from __future__ import annotations

import pytest

from mvengine.project.layout import CommitRecord
from mvengine.runtime.steps import (
    APPLY,
    FINISH,
    FIRE_TIMERS,
    REBUILD,
    RECOMPUTE,
    SKIP,
    WAIT,
    Step,
    ViewFacts,
    decide,
    decide_interrupted,
)

# A view over source `s` and view `u`, incremental unless a case says otherwise.
VIEW = ViewFacts("v", incremental=True, sql_hash="h1", inputs=("s", "u"), upstream=frozenset({"u"}))
FULL_VIEW = ViewFacts("v", incremental=False, sql_hash="h1", inputs=("s", "u"), upstream=frozenset({"u"}))


def last(inputs: dict[str, int], *, sql_hash: str = "h1", kind: str = "stream") -> CommitRecord:
    """The view's last snapshot commit: generation 2, batch 7, reflecting `inputs`."""
    return CommitRecord(
        batch_id=7, generation=2, sql_hash=sql_hash, kind=kind, inputs=inputs, changes=0, version=9
    )


AT = {"s": 5, "u": 3}  # the view's inputs where the batch's cut puts them

# (case, view, last commit, cut, upstream views at the cut, options) -> (action, generation, batch, kind, reason)
CASES = [
    ("new view", VIEW, None, {"s": 5}, {"u": 3}, {}, (REBUILD, 0, 0, "bootstrap", "new view")),
    ("new full view", FULL_VIEW, None, {"s": 5}, {"u": 3}, {}, (REBUILD, 0, 0, "full", "new view")),
    (
        "SQL changed",
        VIEW,
        last(AT, sql_hash="h0"),
        {"s": 5},
        {"u": 3},
        {},
        (REBUILD, 3, 8, "bootstrap", "SQL changed: rebuilt from the inputs"),
    ),
    (
        "SQL and columns changed",
        VIEW,
        last(AT, sql_hash="h0"),
        {"s": 5},
        {"u": 3},
        {"columns_changed": lambda: True},
        (
            REBUILD,
            3,
            8,
            "bootstrap",
            "SQL changed: rebuilt from the inputs; its columns changed: its snapshot and changelog take them in "
            "a new version",
        ),
    ),
    (
        "--full",
        VIEW,
        last(AT),
        {"s": 5},
        {"u": 3},
        {"rebuild": True},
        (REBUILD, 3, 8, "bootstrap", "--full: recomputed from the inputs"),
    ),
    (
        "upstream view started over",
        VIEW,
        last({"s": 5, "u": 12}),
        {"s": 5},
        {"u": 0},
        {},
        (REBUILD, 3, 8, "bootstrap", "an upstream view started over: rebuilt from the inputs"),
    ),
    (
        "a source moved",
        VIEW,
        last({"s": 4, "u": 3}),
        {"s": 5},
        {"u": 3},
        {},
        (APPLY, 2, 8, "stream", "its inputs moved"),
    ),
    (
        "the upstream view moved",
        VIEW,
        last({"s": 5, "u": 2}),
        {"s": 5},
        {"u": 3},
        {},
        (APPLY, 2, 8, "stream", "its inputs moved"),
    ),
    (
        "a full-refresh view's input moved",
        FULL_VIEW,
        last({"s": 4, "u": 3}, kind="full"),
        {"s": 5},
        {"u": 3},
        {},
        (RECOMPUTE, 2, 8, "full", "its inputs moved; it is refreshed in full"),
    ),
    (
        "nothing moved, EMIT rows due",
        VIEW,
        last(AT),
        {"s": 5},
        {"u": 3},
        {"timers_due": lambda: "rows held by its EMIT policy are due"},
        (FIRE_TIMERS, 2, 8, "stream", "rows held by its EMIT policy are due"),
    ),
    (
        "nothing moved, a full view has no timers",
        FULL_VIEW,
        last(AT, kind="full"),
        {"s": 5},
        {"u": 3},
        {"timers_due": lambda: "rows held by its EMIT policy are due"},
        (SKIP, 0, 0, "", "its inputs did not move"),
    ),
    ("nothing moved", VIEW, last(AT), {"s": 5}, {"u": 3}, {}, (SKIP, 0, 0, "", "its inputs did not move")),
    (
        "the upstream view is not at the cut",
        VIEW,
        last(AT),
        {"s": 6},
        {},
        {},
        (WAIT, 0, 0, "", "u not at this batch's cut"),
    ),
    (
        "rebuilt past the cut",
        VIEW,
        last({"s": 8, "u": 3}),
        {"s": 5},
        {"u": 3},
        {},
        (WAIT, 0, 0, "", "rebuilt at a later cut: waits for its sources' versions to reach it"),
    ),
    (
        "rebuilt past the cut, and --full",
        VIEW,
        last({"s": 8, "u": 3}),
        {"s": 5},
        {"u": 3},
        {"rebuild": True},
        (REBUILD, 3, 8, "bootstrap", "--full: recomputed from the inputs"),
    ),
]


@pytest.mark.parametrize(
    ("view", "last_commit", "cut", "at_cut", "options", "expected"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_decide(view, last_commit, cut, at_cut, options, expected):
    step = decide(view, last_commit, cut, at_cut, **options)
    assert (step.action, step.generation, step.batch_id, step.kind, step.reason) == expected
    if step.action in (APPLY, RECOMPUTE, FIRE_TIMERS, REBUILD):
        assert dict(step.targets) == {"s": cut["s"], "u": at_cut["u"]}
    if step.action in (APPLY, RECOMPUTE, FIRE_TIMERS):
        assert dict(step.versions_before) == last_commit.inputs


def test_facts_are_asked_only_when_they_matter():
    """Whether the columns changed is read only for a rebuild of a view that has tables; whether EMIT rows are
    due only when no input moved (each is a read of a table)."""

    def never() -> bool:
        raise AssertionError("asked")

    assert decide(VIEW, None, {"s": 5}, {"u": 3}, columns_changed=never, timers_due=never).action == REBUILD
    moved = decide(VIEW, last({"s": 4, "u": 3}), {"s": 5}, {"u": 3}, columns_changed=never, timers_due=never)
    assert moved.action == APPLY


@pytest.mark.parametrize(
    ("last_commit", "changelog_committed", "expected"),
    [
        (None, False, None),
        (last(AT), True, None),
        (last(AT, kind="bootstrap"), False, (FINISH, 2, 7, "bootstrap", AT)),
        (last(AT), False, (FINISH, 2, 7, "stream", AT)),
    ],
    ids=["never refreshed", "finished", "an interrupted bootstrap", "an interrupted batch"],
)
def test_an_interrupted_batch_is_finished_as_it_started(last_commit, changelog_committed, expected):
    step = decide_interrupted("v", last_commit, changelog_committed)
    if expected is None:
        assert step is None
    else:
        assert step is not None
        assert (step.action, step.generation, step.batch_id, step.kind, dict(step.targets)) == expected


def test_the_dry_run_line_says_what_moves_and_why():
    step = decide(VIEW, last({"s": 4, "u": 3}), {"s": 5}, {"u": 3})
    assert step.line() == "v: apply, batch 8 [stream] inputs s@4→5, u@3→3 (its inputs moved)"
    assert Step("v", WAIT, "u not at this batch's cut").line() == "v: wait (u not at this batch's cut)"


def test_a_batch_line_notes_why_only_where_the_inputs_moving_does_not_say_it():
    assert decide(VIEW, last({"s": 4, "u": 3}), {"s": 5}, {"u": 3}).note == ""
    assert decide(FULL_VIEW, last({"s": 4, "u": 3}, kind="full"), {"s": 5}, {"u": 3}).note == ""
    assert decide(VIEW, None, {"s": 5}, {"u": 3}).note == "new view"
    due = decide(
        VIEW, last(AT), {"s": 5}, {"u": 3}, timers_due=lambda: "rows held by its EMIT policy are due"
    )
    assert due.note == "rows held by its EMIT policy are due"
