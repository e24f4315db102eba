"""Where a batch's time goes: the wall time and the Spark jobs of each phase, in the order they ran.

Spark is lazy, so a phase's time is that of the jobs its own actions ran (a read that only plans costs its
planning; the job that reads the rows is counted where the rows are first needed). Jobs are counted through a
job group per phase (Spark's status tracker), so a phase that ran none says so. `mv refresh --profile` prints
it under each batch line; `benchmarks/` read it from the batch reports.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class Phase:
    name: str
    millis: int
    jobs: int

    def text(self) -> str:
        return f"{self.name} {self.millis} ms ({self.jobs} job{'' if self.jobs == 1 else 's'})"


@dataclass
class Profile:
    spark: SparkSession  # or a SparkOnDemand standing in for one
    phases: list[Phase] = field(default_factory=list)
    notes: list[str] = field(
        default_factory=list
    )  # why the batch went where it went (a driver batch to Spark)

    @contextmanager
    def phase(self, name: str, *, spark: bool = True) -> Iterator[None]:
        """Time the block and count the Spark jobs it ran (phases do not nest); `spark=False` for a block that
        cannot run any (on the driver: counting costs a few calls into the JVM). A session not started yet
        (runtime/session.SparkOnDemand) is not started for this: a phase that starts it counts every job."""
        running = spark and getattr(self.spark, "started", True)
        context = self.spark.sparkContext if running else None
        group = f"mvengine-{uuid.uuid4().hex}"
        if context is not None:
            context.setJobGroup(group, name)
        started = time.monotonic()
        try:
            yield
        finally:
            millis = int((time.monotonic() - started) * 1000)
            if context is not None:
                jobs = len(context.statusTracker().getJobIdsForGroup(group))
                context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]  # None unsets it
                context.setLocalProperty("spark.job.description", None)  # type: ignore[arg-type]
            elif spark and getattr(
                self.spark, "started", False
            ):  # started inside this phase: its jobs so far
                millis -= int(getattr(self.spark, "start_seconds", 0.0) * 1000)
                jobs = len(self.spark.sparkContext.statusTracker().getJobIdsForGroup(None))
            else:
                jobs = 0
            self.phases.append(Phase(name, millis, jobs))

    def add(self, name: str, millis: int) -> None:
        """A phase timed elsewhere, without Spark jobs of its own (a streaming query's start)."""
        self.phases.append(Phase(name, millis, 0))
