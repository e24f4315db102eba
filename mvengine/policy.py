"""Where a batch runs and whether it recomputes: every size threshold of the runtime, in one place.

A refresh computes a batch on the driver (Arrow, delta-rs: no Spark job) or in Spark, and an incremental batch
of many changes may recompute its view instead. Four thresholds are the project's to set (`[refresh]` of
conf/mvengine.toml); the others are measured constants of this machine's kind (benchmarks/README.md, "Which
reader, which writer", "Small commits" and "Incremental or full"), kept here so that each exists once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class EngineChoice:
    """Where a batch is computed, and why (printed on the batch's line when it is Spark)."""

    engine: str  # "driver" or "spark"
    reason: str

    @property
    def on_driver(self) -> bool:
        return self.engine == "driver"


@dataclass(frozen=True)
class ExecutionPolicy:
    # -- [refresh] settings --
    # A batch whose inputs changed by at most this many rows is computed on the driver when the view's
    # operators and expressions allow it (incremental/driver.py); larger ones by Spark.
    driver_max_changes: int = 2_000_000
    # A view under refresh_policy 'auto' is recomputed instead of maintained when a batch changes more than this
    # share of its inputs' rows (recompute_above_in_spark for a batch Spark computes), and at least
    # recompute_min_changes rows.
    recompute_above: float = 0.8
    recompute_above_in_spark: float = 0.1
    recompute_min_changes: int = 100_000
    # -- measured constants --
    # An input's changes of at most this many rows are read by delta-rs on the driver even for a batch Spark
    # computes: above it, moving rows from Python into Spark costs more than reading them in Spark's workers.
    change_feed_on_driver: int = 50_000
    # A batch that writes at most this many rows (state, snapshot, changelog), or a recomputation over inputs of
    # at most this many, writes from the driver: a Spark write job costs ~10× collecting a few rows.
    write_from_driver: int = 500_000
    # A Spark batch's intermediate results and changelog of at most this many rows are collected to the driver
    # and go on there (a Spark job costs ~150 ms whatever its size; a few thousand rows in Python, milliseconds).
    collect_to_driver: int = 100_000
    # A Spark batch whose view's top rule keeps at most this many rows goes on on the driver from there
    # (incremental/hand_off.py): one collect of what the rule keeps costs less than the dozen Spark jobs the rest
    # of the batch and its writes take, and the driver holds no more than this (benchmarks/README.md, "Issue 39,
    # point 4", run I: a 100M-row GROUP BY's bootstrap 1.38x -> 1.23x CTAS at a million groups).
    hand_off_rows: int = 1_000_000
    # A batch's MERGE that drops the state rows past a view's allowed lateness reads the whole state table: a
    # table of n times this many rows is purged in every n-th batch (by batch id), so that the batches read about
    # this many rows a batch for it (benchmarks/README.md, "Issue 39, point 3": 0.5 s a purge at 2-3M rows).
    purge_scan_rows: int = 500_000
    # Running windows under a lateness fold the state rows behind the late cutoff into a row per partition in a
    # sweep, once the files wholly behind it hold this many rows; the batches between fold none. A sweep's MERGE
    # spans the whole state table, so fewer, larger sweeps cost less a row (benchmarks/README.md, "Issue 39,
    # point 3: running windows": 100k rows a sweep, 1.15 s every batch; 500k, about 3 s every sixth, 0.5 s
    # between).
    fold_sweep_rows: int = 500_000
    # A pipeline batch commits this many views computed on the driver at once, on threads, while it computes
    # the next (runtime/background_commits.py): their commits are most of a small batch, and delta-rs writes
    # without the GIL. 0 commits each view before the next one starts.
    background_commits: int = 2
    # Rows a driver batch may read of one table (a join's other side, a bag view's snapshot): past this, Spark.
    driver_read_rows: int = 2_000_000
    # A state read in Spark of a table past state_pushdown_min_bytes is narrowed to the batch's keys: up to
    # state_pushdown_keys of them by `key IN (...)`, which the Delta data source pushes down to skip files by
    # their min/max statistics; beyond, by `key BETWEEN min AND max`, which skips the files of other key ranges
    # (keys that arrive in order, such as ids or times, keep their files apart). Listing the keys costs a Spark
    # job, so smaller tables are read whole.
    state_pushdown_keys: int = 5_000
    state_pushdown_min_bytes: int = 32 * 1024 * 1024
    # Tables of at most this many rows are validated (`mv validate`) by GX's pandas engine on the driver.
    validate_on_driver: int = 1_000_000

    def engine(self, *, unsupported: str | None, changes: int) -> EngineChoice:
        """Where an incremental batch of `changes` input rows runs, for a view whose plan the driver cannot
        compute for the reason `unsupported` (None: it can)."""
        if unsupported is not None:
            return EngineChoice("spark", unsupported)
        if changes > self.driver_max_changes:
            return EngineChoice(
                "spark", f"{changes} changes, above [refresh] driver_max_changes {self.driver_max_changes}"
            )
        return EngineChoice(
            "driver", f"{changes} changes, at most driver_max_changes {self.driver_max_changes}"
        )

    def feed_rows_on_driver(self, unsupported: str | None) -> int:
        """How many rows of an input's changes are read on the driver, for a view whose plan the driver cannot
        compute for the reason `unsupported` (None: it can, and its batch may need no Spark at all)."""
        return self.driver_max_changes if unsupported is None else self.change_feed_on_driver

    def recompute_instead(
        self,
        *,
        changes: int,
        input_rows: Callable[[], int],
        choice: EngineChoice,
        refresh_policy: str,
        by_arrival: bool,
        appends: bool = False,
    ) -> str:
        """Why an incremental batch recomputes its view instead ("" when it does not): under refresh_policy
        'auto', when its changes are a larger share of its inputs' rows (`input_rows()`) than the threshold of
        the engine it would run on, and at least recompute_min_changes. Never for a view whose rows depend on
        when input rows arrived (PROCTIME(), FIRST/LAST): a recomputation cannot know; nor for a batch that
        `appends` its own rows only (inserts into a row-by-row view), which costs less than any recomputation."""
        if refresh_policy != "auto" or by_arrival or appends or changes < max(self.recompute_min_changes, 1):
            return ""
        total = input_rows()  # (a read of the inputs' logs: only past the checks above)
        share = changes / max(total, 1)
        setting = "recompute_above" if choice.on_driver else "recompute_above_in_spark"
        threshold = getattr(self, setting)
        if share <= threshold:
            return ""
        return (
            f"recomputed by cost: {changes} changes are {share:.0%} of the inputs' {total} rows, above "
            f"{setting} {threshold:g}"
        )


DEFAULT_POLICY = ExecutionPolicy()
