"""Prometheus metrics at `/metrics` (prometheus-client), served by `mv ui` and by `mv refresh --continuous
--metrics-port PORT`.

Two kinds, so that any process can serve them:
- **the warehouse's**, read from the Delta logs at each scrape (as `mv status` reads them): per view its batches,
  changelog rows, the last batch's rows in and out and time, its lag and commits behind, rows, state bytes, and
  whether its last batch failed; per source its version; quarantined rows per table;
- **the refreshing process's own** (`--continuous`): batches, rows in and out, and a histogram of batch times,
  counted from the batches as they commit.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from mvengine.reading.status import status
from mvengine.runtime.quarantine import quarantine_table
from mvengine.storage.tables import table_rows

if TYPE_CHECKING:
    from mvengine.api import Project
    from mvengine.runtime.batch_report import BatchReport

PREFIX = "mvengine"


class WarehouseCollector(Collector):
    """The warehouse's metrics, read from its tables' logs at each scrape (no Spark)."""

    def __init__(self, project: Project) -> None:
        self.project = project

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        rows = status(self.project.versions())
        views = [r for r in rows if r.kind == "view" and r.version is not None]

        def gauge(name: str, text: str, values: list[tuple[str, float | None]], label: str = "view"):
            family = GaugeMetricFamily(f"{PREFIX}_{name}", text, labels=[label])
            for who, value in values:
                if value is not None:
                    family.add_metric([who], float(value))
            return family

        batches = CounterMetricFamily(
            f"{PREFIX}_view_batches", "batches the view's snapshot committed (its versions)", labels=["view"]
        )
        for r in views:
            assert r.version is not None
            batches.add_metric([r.name], r.version + 1)
        yield batches
        yield gauge(
            "view_version", "the view's latest snapshot version", [(r.name, r.version) for r in views]
        )
        yield gauge(
            "view_lag_seconds",
            "age of the oldest source commit the view does not reflect (0: fresh)",
            [(r.name, r.lag_s) for r in views],
        )
        yield gauge(
            "view_behind_commits",
            "source commits the view does not reflect yet",
            [(r.name, r.behind) for r in views],
        )
        yield gauge(
            "view_last_batch_seconds",
            "the last batch's time",
            [(r.name, None if r.batch_ms is None else r.batch_ms / 1000) for r in views],
        )
        yield gauge(
            "view_last_batch_rows_in",
            "the last batch's input changes (absent: a recomputation)",
            [(r.name, r.rows_in) for r in views],
        )
        yield gauge(
            "view_last_batch_rows_out",
            "the last batch's changelog rows",
            [(r.name, r.rows_out) for r in views],
        )
        yield gauge("view_rows", "rows in the view's snapshot", [(r.name, r.rows) for r in views])
        yield gauge(
            "view_state_bytes", "bytes of the view's state tables", [(r.name, r.state_bytes) for r in views]
        )
        yield gauge(
            "view_failing",
            "1 when the view's last batch failed (the pipeline's record of it), else 0",
            [
                (r.name, 1.0 if r.problem and r.problem.startswith("last batch failed") else 0.0)
                for r in rows
                if r.kind == "view"
            ],
        )
        yield gauge(
            "source_version",
            "the source's latest Delta version",
            [(r.name, r.version) for r in rows if r.kind == "source"],
            label="source",
        )
        yield gauge(
            "quarantined_rows",
            "rows a QUARANTINE expectation set aside, per source or view",
            list(self._quarantined()),
            label="table",
        )

    def _quarantined(self) -> Iterator[tuple[str, float]]:
        config, catalog = self.project.config, self.project.catalog
        declaring = [
            n
            for n, s in catalog.sources.items()
            if any(e.on_violation == "QUARANTINE" for e in s.expectations)
        ]
        declaring += [
            n
            for n, p in catalog.plans.items()
            if any(e.on_violation == "QUARANTINE" for e in p.view.expectations)
        ]
        for name in declaring:
            ref = quarantine_table(config, catalog, name)
            yield name, float(table_rows(ref, ref.open().version()) if ref.exists() else 0)


class BatchMetrics:
    """The refreshing process's own counts, from the batches it commits."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.batches = Counter(
            f"{PREFIX}_batches",
            "batches this process committed",
            ["view", "kind", "engine"],
            registry=registry,
        )
        self.rows_in = Counter(
            f"{PREFIX}_rows_in", "input changes of its batches", ["view"], registry=registry
        )
        self.rows_out = Counter(
            f"{PREFIX}_rows_out", "changelog rows of its batches", ["view"], registry=registry
        )
        self.seconds = Histogram(
            f"{PREFIX}_batch_seconds",
            "its batches' times",
            ["view"],
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
            registry=registry,
        )

    def batch(self, report: BatchReport) -> None:
        self.batches.labels(report.view, report.kind, report.engine).inc()
        if report.rows_in is not None:
            self.rows_in.labels(report.view).inc(report.rows_in)
        self.rows_out.labels(report.view).inc(report.rows_out)
        self.seconds.labels(report.view).observe(report.millis / 1000)


def registry_for(project: Project) -> CollectorRegistry:
    """A registry with the warehouse's metrics (BatchMetrics adds the process's own to it)."""
    registry = CollectorRegistry()
    registry.register(WarehouseCollector(project))
    return registry


def serve_metrics(registry: CollectorRegistry, port: int) -> int:
    """Serve `/metrics` on loopback at `port` (0: one the system picks) from a thread; returns the port."""
    from prometheus_client import start_http_server

    server, _ = start_http_server(port, addr="127.0.0.1", registry=registry)
    return int(server.server_port)
