"""OpenLineage events (issue 40): every committed batch is a COMPLETE run event of the view's job, from its
inputs at the versions it read to its snapshot and changelog, through the file transport and over HTTP."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from mvengine.api import Project
from mvengine.config import load_config
from mvengine.errors import ConfigError
from tests.spark import test_refresh_differential as differential

VIEWS = "CREATE MATERIALIZED VIEW per_g AS SELECT g, SUM(v) AS s FROM t GROUP BY g;\n"


def _project(root: Path, transport: str) -> Project:
    differential.make_project(root, VIEWS)
    (root / "conf").mkdir()
    (root / "conf" / "mvengine.toml").write_text(f'[lineage]\nnamespace = "shop"\ntransport = {transport}\n')
    return Project(load_config(root))


def _check(events: list[dict], warehouse: str) -> None:
    per_g = [e for e in events if e["job"]["name"] == "per_g"]
    assert [e["eventType"] for e in per_g] == ["COMPLETE", "COMPLETE"]
    assert {e["job"]["namespace"] for e in per_g} == {"shop"}
    assert len({e["run"]["runId"] for e in per_g}) == 2
    last = per_g[-1]
    assert [
        (i["namespace"], i["name"], i["facets"]["version"]["datasetVersion"]) for i in last["inputs"]
    ] == [("file", f"{warehouse}/sources/t", "1")]
    outputs = {o["name"]: o for o in last["outputs"]}
    assert set(outputs) == {f"{warehouse}/per_g/snapshot", f"{warehouse}/per_g/changelog"}
    assert outputs[f"{warehouse}/per_g/changelog"]["outputFacets"]["outputStatistics"]["rowCount"] == 2
    assert "SUM(v)" in last["job"]["facets"]["sql"]["query"]


def test_each_batch_is_a_lineage_event_in_the_file_transport(spark, tmp_path):
    project = _project(tmp_path, '{ type = "file", log_file_path = "lineage/events.jsonl", append = true }')
    project.refresh()
    differential.apply_commit(spark, project.catalog, ("upsert_t", [(1, "a", 3), (2, "b", 4)]))
    project.refresh()
    lines = (tmp_path / "lineage" / "events.jsonl").read_text().splitlines()
    _check([json.loads(line) for line in lines], project.config.warehouse)


def test_each_batch_is_a_lineage_event_posted_over_http(spark, tmp_path):
    received: list[dict] = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        project = _project(tmp_path, f'{{ type = "http", url = "{url}" }}')
        project.refresh()
        differential.apply_commit(spark, project.catalog, ("upsert_t", [(1, "a", 3), (2, "b", 4)]))
        project.refresh()
    finally:
        server.shutdown()
    _check(received, project.config.warehouse)


def test_a_lineage_transport_without_a_type_is_a_located_error(tmp_path):
    differential.make_project(tmp_path, VIEWS)
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "mvengine.toml").write_text('[lineage]\ntransport = { url = "http://x" }\n')
    with pytest.raises(ConfigError, match="transport must be a table with a type") as failed:
        load_config(tmp_path)
    assert "mvengine.toml" in str(failed.value) or failed.value.hint
