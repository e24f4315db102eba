"""What every step of a refresh shares: Spark, the project, where its tables are, and what its batches report."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from mvengine.config import Config
from mvengine.errors import MvError
from mvengine.incremental.driver_support import driver_finishes, not_on_driver
from mvengine.plan.view_plan import ViewPlan
from mvengine.policy import EngineChoice, ExecutionPolicy
from mvengine.project.catalog import Catalog
from mvengine.project.layout import source_table, view_tables
from mvengine.runtime.background_commits import BackgroundCommits
from mvengine.runtime.batch_report import BatchReport
from mvengine.runtime.session import SparkOnDemand
from mvengine.storage.sources import SchemaDrift
from mvengine.storage.tables import TableRef


@dataclass
class RefreshContext:
    spark: SparkSession  # or a SparkOnDemand standing in for one (started by the first batch needing Spark)
    config: Config
    catalog: Catalog
    report: Callable[[BatchReport], None] = lambda r: None
    notice: Callable[[str], None] = lambda line: None  # what is not a view's batch (the query's start)
    writing: set[str] = field(default_factory=set)  # views whose writes began in this pipeline batch
    batch_ms: dict[str, int] = field(default_factory=dict)  # as the snapshot commit records it
    # sources whose columns another writer changed (refresh_plan.prepare_sources), and the views that a dropped
    # or retyped column stops, each with its located error (the others are refreshed)
    drifts: dict[str, SchemaDrift] = field(default_factory=dict)
    blocked: dict[str, str] = field(default_factory=dict)
    # during a pipeline batch: where a view computed on the driver commits while the next one is computed
    commits: BackgroundCommits | None = None
    _driver_reasons: dict[str, str | None] = field(default_factory=dict)  # see engine()

    @property
    def policy(self) -> ExecutionPolicy:
        return self.config.policy

    def source_ref(self, name: str) -> TableRef:
        return source_table(self.catalog.sources[name], self.config.storage_options)

    def sources_of(self, plans: list[ViewPlan]) -> list[str]:
        return sorted({n for plan in plans for n in plan.inputs if n in self.catalog.sources})

    def input_refs(self, plan: ViewPlan) -> dict[str, TableRef]:
        refs = {}
        for name in plan.inputs:
            if name in self.catalog.sources:
                refs[name] = self.source_ref(name)
            else:
                refs[name] = view_tables(self.catalog.plans[name], self.config.storage_options).snapshot
                if not refs[name].exists():
                    raise MvError(
                        f"view {plan.name} reads view {name}, which has not been refreshed yet",
                        hint=f"run mv refresh {name} first (mv refresh refreshes in dependency order)",
                    )
        return refs

    def driver_reason(self, plan: ViewPlan) -> str | None:
        """Why the driver never computes the view's batches (None: it computes its small ones), from its plan."""
        if plan.name not in self._driver_reasons:
            self._driver_reasons[plan.name] = not_on_driver(plan.root, plan.view.state_ttl is not None)
        return self._driver_reasons[plan.name]

    def engine(self, plan: ViewPlan, changes: int) -> EngineChoice:
        """Where an incremental batch of the view with `changes` input rows runs: the policy's choice."""
        return self.policy.engine(unsupported=self.driver_reason(plan), changes=changes)

    def finishing_nodes(self, plan: ViewPlan) -> frozenset[int]:
        """The nodes (by id) where the view's Spark batches may be finished on the driver (incremental/hand_off.py):
        none when the policy keeps Spark's batches in Spark (`driver_max_changes` or `hand_off_rows` 0), when a
        column has no Arrow type, or when the view or a source it reads declares expectations (checked by
        Spark on Spark's rows)."""
        expected = plan.view.expectations or any(
            self.catalog.sources[n].expectations for n in plan.inputs if n in self.catalog.sources
        )
        if (
            self.policy.driver_max_changes <= 0
            or self.policy.hand_off_rows <= 0
            or plan.arrow_schema() is None
            or expected
        ):
            return frozenset()
        return driver_finishes(plan.root, plan.view.state_ttl is not None)

    def start_spark(self) -> None:
        """Spark's functions need a running session: start it (if it waits for its first use) before them."""
        if isinstance(self.spark, SparkOnDemand):
            self.spark.session()

    def recorded_ms(self, plan: ViewPlan, started: float) -> int:
        """The batch's time as its snapshot commit records it (`mv status`'s ms): from its start until the new
        version is committed, readable; the changelog's commit comes after."""
        return self.batch_ms.pop(plan.name, None) or self.millis_since(started)

    def millis_since(self, started: float) -> int:
        """A batch's time, without Spark's start when the batch was the one that started it (a line of its own,
        runtime/session.SparkOnDemand)."""
        elapsed = time.monotonic() - started
        spark_started = getattr(self.spark, "started_at", None)
        if spark_started is not None and spark_started >= started:
            elapsed -= getattr(self.spark, "start_seconds", 0.0)
        return int(elapsed * 1000)
