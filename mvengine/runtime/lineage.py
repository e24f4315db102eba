"""OpenLineage: a run event for every committed batch, from its inputs at the versions it read to the view's
snapshot and changelog, through openlineage-python's transports (`[lineage] transport`: a file, HTTP, ...).

Spark's OpenLineage listener does not see these writes (most of them come from the driver, by delta-rs), so
mvengine emits its own. One job per view (`<namespace>.<view>`), one COMPLETE event per batch, with a run id of
its own; datasets are named as OpenLineage names files and object stores (namespace `file` or
`scheme://bucket`, name the table's path), each with its Delta version.
"""

from __future__ import annotations

import os
import uuid
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlparse

from mvengine.config import Config
from mvengine.errors import ConfigError
from mvengine.project.catalog import Catalog
from mvengine.project.layout import source_table, view_tables
from mvengine.runtime.batch_report import BatchReport
from mvengine.storage.tables import first_line

PRODUCER = "https://github.com/mvengine/mvengine"


class Lineage:
    """The project's OpenLineage client (none without `[lineage] transport`)."""

    def __init__(self, config: Config, catalog: Catalog) -> None:
        self.config, self.catalog = config, catalog
        self.client: Any = None
        transport = config.lineage_transport
        if transport is not None:
            from openlineage.client import OpenLineageClient

            path = str(transport.get("log_file_path", "")) if transport.get("type") == "file" else ""
            if path and "://" not in path:  # (the transport does not make its folder)
                os.makedirs(os.path.dirname(path) or ".", exist_ok=True)

            try:
                self.client = OpenLineageClient(config={"transport": dict(transport)})
            except Exception as e:  # an unknown transport type, a missing url: the config's mistake
                raise ConfigError(
                    f"[lineage] transport: {first_line(str(e))}",
                    hint='e.g. transport = { type = "file", log_file_path = "lineage.jsonl", append = true }',
                ) from None

    @property
    def enabled(self) -> bool:
        return self.client is not None

    def batch(self, report: BatchReport) -> str | None:
        """Emit the batch's event; what went wrong, in one line, when the transport failed (the batch stands)."""
        if self.client is None:
            return None
        try:
            self.client.emit(self.event(report))
        except Exception as e:
            return f"lineage: the event of {report.view} batch {report.batch_id} was not sent: {first_line(str(e))}"
        return None

    def event(self, report: BatchReport) -> Any:
        from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
        from openlineage.client.facet_v2 import (
            dataset_version_dataset,
            output_statistics_output_dataset,
            sql_job,
        )

        plan = self.catalog.plans[report.view]
        options = self.config.storage_options
        inputs = []
        for name, version in report.inputs.items():
            ref = (
                source_table(self.catalog.sources[name], options)
                if name in self.catalog.sources
                else view_tables(self.catalog.plans[name], options).snapshot
            )
            namespace, path = dataset_name(ref.uri)
            inputs.append(
                InputDataset(
                    namespace,
                    path,
                    facets={"version": dataset_version_dataset.DatasetVersionDatasetFacet(str(version))},
                )
            )
        tables = view_tables(plan, options)
        outputs = []
        statistics = output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet
        for ref, rows in ((tables.snapshot, None), (tables.changelog, report.rows_out)):
            namespace, path = dataset_name(ref.uri)
            version = ref.open().version() if ref.exists() else 0
            outputs.append(
                OutputDataset(
                    namespace,
                    path,
                    facets={"version": dataset_version_dataset.DatasetVersionDatasetFacet(str(version))},
                    outputFacets={} if rows is None else {"outputStatistics": statistics(rows)},
                )
            )
        return RunEvent(
            eventType=RunState.COMPLETE,
            eventTime=datetime.now(UTC).isoformat(),
            run=Run(str(uuid.uuid4())),
            job=Job(
                self.config.lineage_namespace,
                report.view,
                facets={"sql": sql_job.SQLJobFacet(plan.view.query.sql("spark"))},
            ),
            inputs=inputs,
            outputs=outputs,
            producer=PRODUCER,
        )


def dataset_name(uri: str) -> tuple[str, str]:
    """(namespace, name) of a table, as OpenLineage names files (`file`, the path) and object stores
    (`s3://bucket`, the path in it)."""
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        return "file", parsed.path if parsed.scheme else uri
    return f"{parsed.scheme}://{parsed.netloc}", parsed.path.lstrip("/")
