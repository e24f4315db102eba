"""`mv plan` and `mv graph` as a user runs them (real processes, on a copy of the example project)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.system.test_cli import BIN, run

ROOT = Path(__file__).parent.parent.parent


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "views").mkdir()
    shutil.copy(ROOT / "views" / "sources.sql", tmp_path / "views" / "sources.sql")
    shutil.copy(ROOT / "views" / "team_totals.sql", tmp_path / "views" / "team_totals.sql")
    (tmp_path / "views" / "more.sql").write_text(
        "CREATE MATERIALIZED VIEW top_scores AS SELECT name, score FROM user_scores LIMIT 3;\n"
        "CREATE MATERIALIZED VIEW big_teams AS SELECT team FROM team_totals WHERE n > 10;\n"
    )
    return tmp_path


def test_plan_prints_every_view_in_dag_order(project):
    result = run("--project", str(project), "plan")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith("order: user_scores -> users -> top_scores -> team_totals -> big_teams\n")
    assert "view team_totals  (views/team_totals.sql:3)" in out
    assert "  key        team\n  event time -\n  changelog  upsert\n  strategy   incremental\n" in out
    assert "  strategy   full: LIMIT without ORDER BY picks arbitrary rows\n" in out
    assert "Scan team_totals (view)" in out


def test_plan_json_is_the_documented_document(project):
    result = run("--project", str(project), "plan", "--json", "team_totals")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert set(doc) == {"order", "sources", "views"}
    assert set(doc["sources"][0]) == {
        "name",
        "path",
        "table",
        "key",
        "append_only",
        "watermark",
        "ignored_columns",
        "problem",
    }
    (view,) = doc["views"]
    assert {
        "name",
        "file",
        "line",
        "inputs",
        "columns",
        "key",
        "changelog",
        "strategy",
        "reason",
        "state",
        "bounded_state",
    } <= set(view)
    assert view["columns"][1] == {"name": "total", "type": "bigint", "nullable": True}


def test_plan_does_not_start_spark(project):
    code = (
        "import sys; from mvengine.cli.main import main; code = main(['--project', sys.argv[1], 'plan']); "
        "assert 'pyspark' not in sys.modules, 'pyspark was imported'; sys.exit(code)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(project)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr


def test_plan_errors_are_one_line_with_a_hint(project):
    (project / "views" / "bad.sql").write_text(
        "CREATE MATERIALIZED VIEW bad AS\nSELECT team, scroe FROM user_scores;\n"
    )
    result = run("--project", str(project), "plan")
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == (
        "Error: views/bad.sql:2:14: view bad: unknown column 'scroe'\n  hint: did you mean score?\n"
    )


def test_graph_as_mermaid_and_dot_shows_node_kinds(project):
    mermaid = run("--project", str(project), "graph")
    assert mermaid.returncode == 0, mermaid.stderr
    lines = mermaid.stdout.splitlines()
    assert lines[0] == "flowchart LR"
    assert '  n0[("user_scores<br/>source, append-only")]:::source' in lines
    assert '  n2{{"top_scores<br/>full, retract"}}:::full' in lines
    assert '  n3("team_totals<br/>incremental, upsert"):::incremental' in lines
    assert "  n0 --> n3" in lines and "  n3 --> n4" in lines
    dot = run("--project", str(project), "graph", "--format", "dot", "--out", str(project / "dag.dot"))
    assert dot.returncode == 0, dot.stderr
    text = (project / "dag.dot").read_text()
    assert '"user_scores" [label="user_scores\\nsource, append-only", shape=cylinder' in text
    assert '"top_scores" [label="top_scores\\nfull, retract", shape=box, style="dashed,filled"' in text
    assert '"team_totals" -> "big_teams";' in text


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_graph_draws_svg_with_graphviz(project):
    result = run("--project", str(project), "graph", "--format", "svg", "--out", str(project / "dag.svg"))
    assert result.returncode == 0, result.stderr
    svg = (project / "dag.svg").read_text()
    assert svg.startswith("<?xml") and "team_totals" in svg and "top_scores" in svg


def test_graph_image_without_graphviz_says_what_to_install(project):
    env = dict(os.environ, PATH=str(BIN))  # a PATH without Graphviz
    result = subprocess.run(
        [
            str(BIN / "mv"),
            "--project",
            str(project),
            "graph",
            "--format",
            "png",
            "--out",
            str(project / "dag.png"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 1 and not (project / "dag.png").exists()
    assert "needs Graphviz's `dot` program, which is not installed" in result.stderr
    missing_out = run("--project", str(project), "graph", "--format", "svg")
    assert missing_out.returncode == 1 and "give it a name with --out FILE" in missing_out.stderr
