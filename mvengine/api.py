"""mvengine's Python API: a project on disk, its views refreshed, read, queried and described. The `mv` commands
are a thin layer over this class.

    from mvengine import Project
    project = Project.open("path/to/project")
    project.refresh()
    project.table("team_totals", version=3).show()
    project.query("SELECT * FROM team_totals TIMESTAMP AS OF '2026-11-21 12:03:00'").show()

Spark starts on the first call that needs it (`describe` and `history` never do); pass `spark=` to use a session
of your own (mvengine registers its Delta data source on it).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from functools import cached_property
from os import PathLike
from typing import TYPE_CHECKING, Any, cast

from mvengine.config import Config, load_config
from mvengine.errors import MvError
from mvengine.project.catalog import Catalog, load_catalog
from mvengine.project.catalog_tables import CatalogTables
from mvengine.project.layout import app_id, last_commit, view_tables
from mvengine.reading.versions import Versions

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from mvengine.runtime.refresh import BatchReport
    from mvengine.runtime.steps import Step

TEMP_VIEW = re.compile(r"`?__mv_(\w+?)_v\d+`?")  # what `mv query` reads a table as (see reading.time_travel)


class Project:
    def __init__(self, config: Config, *, spark: SparkSession | None = None) -> None:
        self.config = config
        self._spark = spark
        self._registered = False
        self._warm: tuple[SparkSession, int] | None | bool = None  # see _reading (False: none serves)

    @classmethod
    def open(cls, path: str | PathLike[str] = ".", *, spark: SparkSession | None = None) -> Project:
        """The project in folder `path` (conf/mvengine.toml and views/); its SQL is read on first use."""
        return cls(load_config(path), spark=spark)

    @cached_property
    def catalog(self) -> Catalog:
        """Every source and view in views/, parsed and planned (SQL mistakes raise SqlError here)."""
        return load_catalog(self.config, self.tables)

    @cached_property
    def tables(self) -> CatalogTables:
        """The tables of Spark's catalog the views read by name, located once (project/catalog_tables.py)."""
        from mvengine.runtime.catalog import catalog_tables

        return catalog_tables(self.config, lambda: self.spark, own=self._spark is None)

    def locate_anew(self) -> None:
        """Locate the catalog tables the views read in the catalog itself, not from the record of earlier
        refreshes (mv refresh --full: a table moved in the catalog is seen). Before `catalog`."""
        from mvengine.runtime.catalog import catalog_tables

        self.__dict__.pop("catalog", None)
        self.tables = catalog_tables(self.config, lambda: self.spark, fresh=True, own=self._spark is None)

    def register_views(self, spark: Callable[[], SparkSession] | None = None) -> list[str]:
        """Register in Spark's catalog the views' tables that are not yet ([catalog] in conf/mvengine.toml), and
        record what was located and registered; returns the warnings (a name taken by another table)."""
        from mvengine.runtime.catalog import register_views

        plans = list(self.catalog.plans.values())
        try:
            warnings = register_views(self.config, self.tables, plans, spark or (lambda: self.spark))
        except Exception as e:  # the batches stand; the next refresh tries again
            warnings = [f"the views were not registered in Spark's catalog: {str(e).splitlines()[0]}"]
        self.tables.save()
        return warnings

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            from mvengine.runtime.session import spark_session

            self._spark = spark_session(self.config)
        elif not self._registered:
            from mvengine.runtime.session import register_data_sources

            register_data_sources(self._spark)
        self._registered = True
        return self._spark

    def _reading(self) -> SparkSession:
        """The session reads run on: this process's Spark when it has one; else the running Spark of the
        process that serves the warehouse (`mv refresh --continuous`, `mv ui`: runtime/connect.py), which starts
        nothing; else a new one."""
        if self._spark is None and self._warm is None:
            from mvengine.runtime.connect import warm_session

            self._warm = warm_session(self.config) or False
            if isinstance(self._warm, tuple):
                from mvengine.runtime.session import register_data_sources

                register_data_sources(self._warm[0])
        if self._spark is None and isinstance(self._warm, tuple):
            return self._warm[0]
        return self.spark

    @property
    def served_by(self) -> int | None:
        """The id of the process whose Spark ran this project's reads (None: this process's own Spark)."""
        return self._warm[1] if self._spark is None and isinstance(self._warm, tuple) else None

    def versions(self) -> Versions:
        """The tables' versions as of now (a new snapshot of their logs per call)."""
        return Versions(self.config, self.catalog)

    # -- refresh --------------------------------------------------------------------------------------------

    def refresh(
        self,
        views: list[str] | None = None,
        *,
        full: bool = False,
        on_batch: Callable[[BatchReport], None] | None = None,
        stopping: Callable[[], bool] | None = None,
        interval_s: float | None = None,
        on_notice: Callable[[str], None] | None = None,
        wait: bool = False,
    ) -> list[BatchReport]:
        """Bring `views` (default: all) and the views they read up to date with every input commit that exists
        now; returns one report per committed view batch (`on_batch` also gets each as it commits). With
        `interval_s`, keep them fresh after that until `stopping()` is true (`mv refresh --continuous`).
        `stopping` is asked between batches: return True to stop after the current one. `on_notice` gets the
        lines that are not a view's batch (the streaming query's start). While another process refreshes the
        warehouse, raise an MvError naming it, or with `wait`, wait for it to end (runtime/lock.py)."""
        from mvengine.runtime.refresh import Refresher
        from mvengine.runtime.session import SparkOnDemand

        if not full and interval_s is None and self._spark is None and not self.stale(views):
            for warning in self.register_views():  # (the record says what is; Spark starts only to register)
                (on_notice or (lambda line: None))(f"warning: {warning}")
            return []  # nothing to do: answered from the Delta logs, without starting Spark

        from mvengine.runtime.lineage import Lineage

        reports: list[BatchReport] = []
        notice = on_notice or (lambda line: None)
        lineage = Lineage(self.config, self.catalog)  # ([lineage] transport: an event per committed batch)

        def report(r: BatchReport) -> None:
            reports.append(r)
            if on_batch is not None:
                on_batch(r)
            problem = lineage.batch(r)
            if problem is not None:
                notice(problem)
            if r.view not in registered:  # a view's first batch here: its tables go into the catalog
                registered.add(r.view)
                for warning in self.register_views(lambda: spark):
                    notice(f"warning: {warning}")

        spark = (
            self._spark
            if self._spark is not None
            else cast(  # it stands in for the session, and starts it when a batch first needs Spark
                "SparkSession",
                SparkOnDemand(
                    lambda: self.spark, lambda seconds: notice(f"Spark started in {seconds:.1f} s")
                ),
            )
        )
        refresher = Refresher(
            spark,
            self.config,
            self.catalog,
            report=report,
            stopping=stopping or (lambda: False),
            notice=notice,
            wait=wait,
        )
        registered: set[str] = set()
        refresher.refresh(views or None, full=full, interval_s=interval_s)
        return reports

    def refresh_steps(
        self, views: list[str] | None = None, *, full: bool = False
    ) -> tuple[dict[str, int] | None, list[Step]]:
        """What `refresh(views, full=full)` would do now, from the Delta logs alone (no Spark), writing nothing:
        the cut of a pipeline batch left half-done that it would finish first (None: none), then each view's
        step (runtime/steps.py), in dependency order."""
        from mvengine.runtime.refresh_plan import pending_cut, planned_steps, prepare_sources

        plans = self.catalog.views_to_refresh(views or None)
        prepare_sources(self.config, self.catalog, create=False)
        return pending_cut(self.config), planned_steps(self.config, self.catalog, plans, full=full)

    def stale(self, views: list[str] | None = None) -> list[str]:
        """The views a refresh of `views` (default: all) would write, in DAG order: never refreshed, SQL
        changed, a batch left unfinished, or an input moved. Reads Delta logs only: no Spark."""
        from mvengine.runtime.refresh_plan import stale_views

        return stale_views(self.config, self.catalog, self.catalog.views_to_refresh(views or None))

    # -- reading --------------------------------------------------------------------------------------------

    def table(
        self, name: str, version: int | None = None, timestamp: str | datetime | None = None
    ) -> DataFrame:
        """A source or a view's snapshot: the latest version, `version`, or the last version committed at or
        before `timestamp` (naive times are UTC)."""
        if version is not None and timestamp is not None:
            raise MvError("give a version or a timestamp, not both")
        versions = self.versions()
        name = versions.name(name)
        if version is not None:
            version = versions.check_version(name, version)
        elif timestamp is not None:
            version = versions.version_at(name, timestamp)
        else:
            version = versions.latest(name)
        return self._read(versions, name, version)

    def query(self, sql: str, *, as_of_source: dict[str, int] | None = None) -> DataFrame:
        """Spark SQL over sources and view snapshots by name, with time travel (see `mv query --help`)."""
        return self.query_reads(sql, as_of_source=as_of_source)[0]

    def query_reads(
        self, sql: str, *, as_of_source: dict[str, int] | None = None
    ) -> tuple[DataFrame, list[tuple[str, int]]]:
        """`query`, and which version of which table it read."""
        from mvengine.reading.time_travel import pin_versions

        versions = self.versions()
        cut = self._cut(versions, as_of_source)
        pinned = pin_versions(sql, versions, as_of_source=cut, evaluate=self._evaluate_time)
        for read in pinned.reads:
            self._read(versions, read.name, read.version).createOrReplaceTempView(read.temp_view)
        return self._spark_sql(pinned.sql), [(r.name, r.version) for r in pinned.reads]

    def changes(
        self,
        name: str,
        from_version: int | None = None,
        to_version: int | None = None,
        *,
        since: str | datetime | None = None,
        upsert: bool = False,
    ) -> DataFrame:
        """The view's changelog rows of snapshot versions `from_version..to_version` (both included; or from
        the first version committed at or after `since`), in retract form or, with `upsert`, in upsert form;
        in emission order."""
        versions = self.versions()
        view = versions.view(name)
        first, last = _version_range(versions, view, from_version, to_version, since)
        return self._changes(view, first, last, upsert)

    def follow_changes(
        self,
        name: str,
        from_version: int | None = None,
        *,
        since: str | datetime | None = None,
        upsert: bool = False,
        interval: float = 1.0,
        stopping: Callable[[], bool] = lambda: False,
    ) -> Iterator[DataFrame]:
        """The changes from `from_version` or `since` (default: all), then those of every batch that lands,
        as it lands (looked for every `interval` seconds), until `stopping()` is true."""
        versions = self.versions()
        view = versions.view(name)
        first, _ = _version_range(versions, view, from_version, None, since)
        if upsert:
            self._changes(
                view, first, first, upsert
            )  # a view without a key fails now, not at its first batch
        while not stopping():
            through = self._changelog_through(view)
            if through >= first:
                yield self._changes(view, first, through, upsert)
                first = through + 1
            else:
                time.sleep(interval)

    def describe(self, name: str) -> dict[str, Any]:
        """What DESIGN.md §5 lists (name, kind, paths, key, strategy, version, inputs), with the schema, row
        count, sizes, lineage (`source_versions`) and freshness. Reads Delta logs only: no Spark."""
        from mvengine.reading.describe import describe

        return describe(self.versions(), name)

    def history(self, name: str) -> list[dict[str, Any]]:
        """One entry per version of a view's snapshot (batch, kind, changes, input versions) or of a source."""
        from mvengine.reading.describe import history

        return history(self.versions(), name)

    # -- helpers --------------------------------------------------------------------------------------------

    def _read(self, versions: Versions, name: str, version: int) -> DataFrame:
        from mvengine.storage.api import read_table

        return read_table(self._reading(), versions.table(name), version=version)

    def _changes(self, view: str, first: int, last: int, upsert: bool) -> DataFrame:
        from pyspark.sql import functions as F

        from mvengine.reading.changes import retract
        from mvengine.reading.changes import upsert as upsert_form
        from mvengine.storage.api import read_table

        plan = self.catalog.plans[view]
        rows = read_table(self._reading(), view_tables(plan, self.config.storage_options).changelog)
        rows = rows.where(F.col("_version").between(first, last))
        return upsert_form(rows, plan) if upsert else retract(rows, plan)

    def _changelog_through(self, view: str) -> int:
        """The latest snapshot version whose changelog rows are committed (a batch commits its snapshot, then
        its changelog)."""
        tables = view_tables(self.catalog.plans[view], self.config.storage_options)
        last = last_commit(tables.snapshot)
        if last is None:
            return -1
        from mvengine.storage.tables import is_committed

        done = is_committed(tables.changelog, app_id(view, last.generation), last.batch_id)
        return last.version if done else last.version - 1

    def _cut(self, versions: Versions, as_of_source: dict[str, int] | None) -> dict[str, int] | None:
        if not as_of_source:
            return None
        cut = {}
        for name, version in as_of_source.items():
            source = versions.name(name)
            if versions.is_view(source):
                raise MvError(
                    f"--as-of-source names view {source}; it takes sources (SOURCE=VERSION)",
                    hint="pin a view with FROM view VERSION AS OF n in the query",
                )
            cut[source] = versions.check_version(source, version)
        return cut

    def _evaluate_time(self, expression: str) -> datetime:
        micros = self._spark_sql(f"SELECT unix_micros(CAST(({expression}) AS TIMESTAMP)) AS t").collect()[0][
            "t"
        ]
        if micros is None:
            raise MvError(f"the time travel expression {expression} is NULL")
        return datetime.fromtimestamp(micros / 1_000_000, tz=UTC)

    def _spark_sql(self, sql: str) -> DataFrame:
        from pyspark.errors import AnalysisException, ParseException

        try:
            return self._reading().sql(sql)
        except (AnalysisException, ParseException) as e:
            # Positions ("line 1 pos 7") are in the rewritten query, not the one given: left out.
            message = TEMP_VIEW.sub(r"\1", str(e).split("\n")[0].split("; line ")[0]).strip()
            raise MvError(
                f"Spark rejects the query: {message}",
                hint="the query is Spark SQL over sources and views by name",
            ) from None


def _version_range(
    versions: Versions,
    view: str,
    from_version: int | None,
    to_version: int | None,
    since: str | datetime | None,
) -> tuple[int, int]:
    """The snapshot versions whose changes are asked for, checked."""
    if since is not None and from_version is not None:
        raise MvError("give a first version or a time to start from (--from-version or --since), not both")
    if since is not None:
        first = versions.first_version_since(view, since)
    else:
        first = versions.check_version(view, from_version) if from_version is not None else 0
    last = versions.check_version(view, to_version) if to_version is not None else versions.latest(view)
    if from_version is not None and first > last:
        raise MvError(f"the first version asked for ({first}) is after the last ({last})")
    return first, last
