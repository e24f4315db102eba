"""Reading the views (issue 6): time travel in each syntax against known versions, the consistent cut across a
two-level DAG, the STREAM renderings of seed 002's Julie/Frank example, describe and history, errors, and the
CLI printing exactly what the Python API returns.

One project is built for the module: seed 002's scores arrive one refresh at a time (user_totals over
user_scores; large_team_totals over team_and_score over user_scores), then Julie's 12:07 score is retracted.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from mvengine import Project
from mvengine.cli.main import main
from mvengine.errors import MvError
from mvengine.reading.describe import DESCRIBE_SOURCE_FIELDS, DESCRIBE_VIEW_FIELDS
from mvengine.reading.versions import show_time
from tests.conftest import rows
from tests.spark.test_refresh_seed import SQL  # seed 002: user_totals, team_and_score, large_team_totals

LARGE = "SELECT team, SUM(score) AS total FROM user_scores GROUP BY team HAVING SUM(score) > 10"


def at(hhmm: str) -> datetime:
    return datetime.fromisoformat(f"2026-11-22 {hhmm}:00+00:00")


def add_scores(project: Project, rows: list[tuple]) -> None:
    name, team, score, ts = zip(*rows)
    write_deltalake(
        project.catalog.sources["user_scores"].path,
        pa.table(
            {
                "name": list(name),
                "team": list(team),
                "score": pa.array(score, pa.int32()),
                "ts": pa.array(ts, pa.timestamp("us", tz="UTC")),
            }
        ),
        mode="append",
    )


@pytest.fixture(scope="module")
def seed(spark, tmp_path_factory) -> Project:
    root = tmp_path_factory.mktemp("reading")
    (root / "views").mkdir()
    (root / "views" / "seed.sql").write_text(SQL)
    project = Project.open(root, spark=spark)
    project.refresh()  # every view at version 0 (empty), user_scores at 0
    add_scores(project, [("Julie", "red", 7, at("12:01"))])  # user_scores v1
    project.refresh()
    add_scores(project, [("Frank", "blue", 3, at("12:03"))])  # v2: no refresh in between
    add_scores(project, [("Julie", "red", 1, at("12:03"))])  # v3
    project.refresh()
    add_scores(project, [("Julie", "red", 4, at("12:07"))])  # v4
    project.refresh()
    DeltaTable(project.catalog.sources["user_scores"].path).delete("name = 'Julie' AND score = 4")  # v5
    project.refresh()
    return project


def arrow_rows(df) -> list[tuple]:
    return sorted(tuple(r.values()) for r in df.toArrow().to_pylist())


def delta_rows(project: Project, name: str, version: int) -> list[tuple]:
    """The table at `version`, read by delta-rs alone: what time travel must return."""
    table = DeltaTable(project.versions().table(name).uri, version=version).to_pyarrow_table()
    return sorted(tuple(r.values()) for r in table.to_pylist())


def commit_time(project: Project, name: str, version: int) -> datetime:
    return next(c.time for c in project.versions().commits(name) if c.version == version)


def source_at(project: Project, sql: str, version: int) -> list[tuple]:
    """The view's SQL run from scratch on the source at `version`."""
    project.table("user_scores", version=version).createOrReplaceTempView("user_scores")
    return rows(project.spark.sql(sql))


# -- time travel --------------------------------------------------------------------------------------------


def test_version_as_of_reads_that_version(seed):
    for version in range(5):
        got = arrow_rows(seed.query(f"SELECT * FROM user_totals VERSION AS OF {version}"))
        assert got == delta_rows(seed, "user_totals", version), version
    assert rows(seed.query("SELECT name, total FROM user_totals VERSION AS OF 2 WHERE name = 'Julie'")) == [
        ("Julie", 8)
    ]


@pytest.mark.parametrize(
    "form",
    [
        "FROM user_totals TIMESTAMP AS OF '{t}'",
        "FROM user_totals FOR SYSTEM_TIME AS OF TIMESTAMP '{t}'",
        "FROM user_totals AS OF SYSTEM TIME '{t}'",  # trailing: for every table of the query
    ],
)
def test_timestamp_forms_pick_the_last_version_committed_at_or_before(seed, form):
    for version in (1, 2, 3):
        committed = commit_time(seed, "user_totals", version)
        for when, expected in ((committed, version), (committed - timedelta(milliseconds=1), version - 1)):
            df, reads = seed.query_reads("SELECT * " + form.format(t=show_time(when)))
            assert reads == [("user_totals", expected)]
            assert arrow_rows(df) == delta_rows(seed, "user_totals", expected)


def test_trailing_as_of_applies_to_every_table_and_a_tables_own_clause_wins(seed):
    when = show_time(commit_time(seed, "user_totals", 2))
    source_version = seed.versions().version_at("user_scores", when)
    df, reads = seed.query_reads(
        "SELECT t.name, t.total, s.n FROM user_totals t JOIN (SELECT name, COUNT(*) AS n FROM user_scores "
        f"GROUP BY name) s ON t.name = s.name AS OF SYSTEM TIME '{when}'"
    )
    assert sorted(reads) == [("user_scores", source_version), ("user_totals", 2)]
    assert rows(df) == [("Frank", 3, 1), ("Julie", 8, 2)]
    _, reads = seed.query_reads(f"SELECT * FROM user_totals VERSION AS OF 4 AS OF SYSTEM TIME '{when}'")
    assert reads == [("user_totals", 4)]


def test_a_join_of_one_view_at_two_points_in_time(seed):
    early = show_time(commit_time(seed, "user_totals", 1))
    df = seed.query(
        f"SELECT n.name, n.total - o.total AS gained FROM user_totals n "
        f"JOIN user_totals TIMESTAMP AS OF '{early}' o ON n.name = o.name"
    )
    assert rows(df) == [("Julie", 1)]  # 7 at version 1, 8 now (12 was retracted)


def test_a_timestamp_expression_is_computed_by_spark(seed):
    _, reads = seed.query_reads("SELECT * FROM user_totals TIMESTAMP AS OF current_timestamp()")
    assert reads == [("user_totals", seed.versions().latest("user_totals"))]


def test_as_of_source_reads_every_view_at_a_consistent_cut(seed):
    versions = seed.versions()
    for source_version in range(6):
        df, reads = seed.query_reads(
            "SELECT l.team, l.total, t.n FROM large_team_totals l "
            "JOIN (SELECT team, COUNT(*) AS n FROM team_and_score GROUP BY team) t ON l.team = t.team",
            as_of_source={"user_scores": source_version},
        )
        for name, version in reads:
            reflected = versions.source_versions(name, version)["user_scores"]
            assert max(reflected) <= source_version
            later = [v for v in versions.snapshot_commits(name) if v > version]
            assert all(max(versions.source_versions(name, v)["user_scores"]) > source_version for v in later)
        # Refreshes ran at source versions 0, 1, 3, 4, 5: version 2 of the source reads the views as of 1.
        reflected = max(
            versions.source_versions("large_team_totals", dict(reads)["large_team_totals"])["user_scores"]
        )
        assert reflected == (1 if source_version == 2 else source_version)
        large = source_at(seed, LARGE, reflected)
        assert [(team, total) for team, total, _ in rows(df)] == large


def test_as_of_source_reads_the_source_itself_at_that_version(seed):
    df, reads = seed.query_reads("SELECT COUNT(*) FROM user_scores", as_of_source={"user_scores": 3})
    assert reads == [("user_scores", 3)] and rows(df) == [(3,)]


# -- the changelog renderings (seed 002) --------------------------------------------------------------------


def test_changes_in_retract_form_are_the_books_stream_with_undo_rows(seed):
    got = [
        (r["name"], r["total"], r["_undo"], r["_op"], r["_version"])
        for r in seed.changes("user_totals").collect()
    ]
    assert got == [
        ("Julie", 7, False, "+I", 1),
        ("Frank", 3, False, "+I", 2),  # the book's 12:03 STREAM: Frank 3, Julie 7 undo, Julie 8
        ("Julie", 7, True, "-U", 2),
        ("Julie", 8, False, "+U", 2),
        ("Julie", 8, True, "-U", 3),  # 12:07: Julie 8 undo, Julie 12
        ("Julie", 12, False, "+U", 3),
        ("Julie", 12, True, "-U", 4),  # the retraction of the 12:07 score
        ("Julie", 8, False, "+U", 4),
    ]
    undo_times = [r["_mtime"] for r in seed.changes("user_totals").toArrow().to_pylist() if r["_undo"]]
    source_times = {c.version: c.time for c in seed.versions().commits("user_scores")}
    assert undo_times == [
        source_times[3],
        source_times[4],
        source_times[5],
    ]  # the book's undo rows: time of change


def test_changes_in_upsert_form_are_the_redo_stream_with_tombstones(seed):
    got = [
        (r["name"], r["total"], r["_op"], r["_tombstone"])
        for r in seed.changes("user_totals", upsert=True).collect()
    ]
    assert got == [
        ("Julie", 7, "+I", False),
        ("Frank", 3, "+I", False),
        ("Julie", 8, "+U", False),
        ("Julie", 12, "+U", False),
        ("Julie", 8, "+U", False),
    ]
    assert [
        tuple(r)
        for r in seed.changes("large_team_totals", upsert=True)
        .select("team", "total", "_op", "_tombstone")
        .collect()
    ] == [("red", 12, "+I", False), ("red", None, "-D", True)]  # the delete: the key and a tombstone


def test_changes_by_version_range_and_since(seed):
    assert [r["_version"] for r in seed.changes("user_totals", 3, 3).collect()] == [3, 3]
    since = show_time(commit_time(seed, "user_totals", 3))
    assert {r["_version"] for r in seed.changes("user_totals", since=since).collect()} == {3, 4}
    assert seed.changes("user_totals", 0, 0).count() == 0  # the bootstrap of an empty source


def test_follow_changes_yields_each_batch_as_it_lands(seed):
    parts = seed.follow_changes("user_totals", from_version=4, interval=0.1)
    assert [r["_op"] for r in next(parts).collect()] == ["-U", "+U"]
    add_scores(seed, [("Anna", "blue", 2, at("12:09"))])
    seed.refresh(["user_totals"])
    assert [(r["name"], r["_op"]) for r in next(parts).collect()] == [("Anna", "+I")]
    parts.close()


# -- describe and history -----------------------------------------------------------------------------------


def test_describe_a_view(seed):
    info = seed.describe("large_team_totals")
    assert {k: info[k] for k in ("name", "kind", "key", "strategy", "reason", "changelog")} == {
        "name": "large_team_totals",
        "kind": "view",
        "key": ["team"],
        "strategy": "incremental",
        "reason": None,
        "changelog": "upsert",
    }
    assert info["snapshot_path"].endswith("large_team_totals/snapshot")
    assert info["changelog_path"].endswith("large_team_totals/changelog")
    assert info["columns"] == [
        {"name": "team", "type": "string", "nullable": True},
        {"name": "total", "type": "bigint", "nullable": True},
    ]
    versions = seed.versions()
    assert info["version"] == versions.latest("large_team_totals")
    upstream = info["inputs"]["team_and_score"]
    assert info["source_versions"] == {
        "user_scores": versions.source_versions("team_and_score", upstream)["user_scores"][0]
    }
    assert info["row_count"] == seed.table("large_team_totals").count()
    assert info["changelog_rows"] == 2 and info["sizes"]["state_bytes"] > 0


def test_describe_reports_staleness_until_the_view_is_refreshed(spark, tmp_path):
    (tmp_path / "views").mkdir()
    (tmp_path / "views" / "seed.sql").write_text(SQL)
    project = Project.open(tmp_path, spark=spark)
    project.refresh(["user_totals"])
    assert project.describe("user_totals")["freshness_lag_s"] == 0.0
    add_scores(project, [("Julie", "red", 7, at("12:01"))])
    committed = commit_time(project, "user_scores", 1)
    stale = project.describe("user_totals")
    assert stale["stale_since"] == show_time(committed) and stale["freshness_lag_s"] > 0
    assert project.describe("team_and_score")["refreshed"] is False
    project.refresh(["user_totals"])
    fresh = project.describe("user_totals")
    assert fresh["stale_since"] is None and fresh["source_versions"] == {"user_scores": 1}


def test_describe_a_source(seed):
    info = seed.describe("USER_SCORES")  # names are case-insensitive
    assert info["name"] == "user_scores" and info["kind"] == "source" and info["changelog_path"] is None
    # DESIGN §5: a source's `snapshot_path` is its table (`path`, its alias, kept for scripts that read it)
    assert info["snapshot_path"] == info["path"] and info["path"].endswith("user_scores")
    assert info["source_versions"] == {"user_scores": info["version"]}
    assert info["version"] == seed.versions().latest("user_scores")
    assert info["row_count"] == seed.table("user_scores").count()


def test_describe_documents_have_exactly_the_documented_fields(seed, spark, tmp_path):
    """docs/reference/json.md is made from these lists: every field a document has is there, and every field there
    is in a document (`mixed_source_versions` only when a view's inputs reached different source versions)."""
    view, source = seed.describe("large_team_totals"), seed.describe("user_scores")
    assert set(view) == set(DESCRIBE_VIEW_FIELDS) - {"mixed_source_versions"}
    assert set(source) == set(DESCRIBE_SOURCE_FIELDS)
    (tmp_path / "views").mkdir()
    (tmp_path / "views" / "seed.sql").write_text(SQL)
    never = Project.open(tmp_path, spark=spark).describe("user_totals")
    assert list(never) == [
        *list(DESCRIBE_VIEW_FIELDS)[: list(DESCRIBE_VIEW_FIELDS).index("source_versions") + 1]
    ]


def test_history_has_one_entry_per_version(seed):
    entries = seed.history("user_totals")
    assert [e["version"] for e in entries] == list(range(len(entries)))
    assert [e["kind"] for e in entries[:5]] == ["bootstrap", "stream", "stream", "stream", "stream"]
    assert [e["inputs"] for e in entries[:5]] == [{"user_scores": v} for v in (0, 1, 3, 4, 5)]
    per_version = {}
    for r in seed.changes("user_totals").collect():
        per_version[r["_version"]] = per_version.get(r["_version"], 0) + 1
    assert [e["changes"] for e in entries] == [per_version.get(e["version"], 0) for e in entries]
    assert [e["source_versions"] for e in seed.history("large_team_totals")[:5]] == [
        {"user_scores": v} for v in (0, 1, 3, 4, 5)
    ]


# -- errors -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda p: p.query("SELECT * FROM user_total"),
            "the query reads 'user_total', which is no source or view",
        ),
        (
            lambda p: p.query("SELECT * FROM user_totals VERSION AS OF 99"),
            "has no version 99: its versions are 0..",
        ),
        (
            lambda p: p.query("SELECT * FROM user_totals TIMESTAMP AS OF '2020-01-01'"),
            "has no version as of 2020-01-01 00:00:00: its earliest version (0) was committed at",
        ),
        (lambda p: p.query("SELECT * FROM user_totals TIMESTAMP AS OF 'noon'"), "invalid timestamp 'noon'"),
        (lambda p: p.query("DELETE FROM user_totals"), "mv query runs one SELECT query"),
        (lambda p: p.query("SELECT nope FROM user_totals"), "Spark rejects the query: [UNRESOLVED_COLUMN"),
        (
            lambda p: p.query("SELECT * FROM user_totals", as_of_source={"team_and_score": 1}),
            "--as-of-source names view team_and_score",
        ),
        (lambda p: p.changes("team_and_score", upsert=True), "view team_and_score has no unique key"),
        (lambda p: p.changes("user_scores"), "user_scores is a source, not a view"),
        (lambda p: p.changes("user_totals", 3, 2), "the first version asked for (3) is after the last (2)"),
        (lambda p: p.describe("nope"), "no source or view named 'nope'"),
        (
            lambda p: p.table("user_totals", version=1, timestamp="2026-01-01"),
            "a version or a timestamp, not both",
        ),
    ],
)
def test_mistakes_are_errors_that_say_what_to_do(seed, call, message):
    with pytest.raises(MvError) as caught:
        call(seed)
    assert message in str(caught.value)


def test_a_time_before_the_first_version_names_the_earliest_time(seed):
    with pytest.raises(MvError) as caught:
        seed.table("user_totals", timestamp="2020-01-01 00:00:00")
    assert show_time(commit_time(seed, "user_totals", 0)) in str(caught.value)


# -- the CLI prints what the API returns --------------------------------------------------------------------


def cli(project: Project, capsys, *args: str) -> str:
    capsys.readouterr()
    assert main(["--project", str(project.config.project_dir), *args]) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def test_cli_query_and_changes_give_the_apis_rows(seed, capsys, tmp_path):
    sql = "SELECT * FROM user_totals VERSION AS OF 3"
    out = tmp_path / "q.parquet"
    cli(seed, capsys, "query", sql, "--format", "parquet", "--out", str(out))
    assert pq.read_table(out).equals(seed.query(sql).toArrow())
    cli(seed, capsys, "changes", "user_totals", "--upsert", "--format", "parquet", "--out", str(out))
    assert pq.read_table(out).equals(seed.changes("user_totals", upsert=True).toArrow())
    lines = cli(seed, capsys, "changes", "user_totals", "--format", "json").splitlines()
    expected = seed.changes("user_totals").collect()
    assert [(j["name"], j["total"], j["_op"], j["_undo"], j["_version"]) for j in map(json.loads, lines)] == [
        (r["name"], r["total"], r["_op"], r["_undo"], r["_version"]) for r in expected
    ]


def test_cli_table_and_csv_formats(seed, capsys):
    text = cli(
        seed, capsys, "query", "SELECT name, total, time FROM user_totals VERSION AS OF 2 ORDER BY name"
    )
    assert text.splitlines() == [
        "name   total  time",
        "Frank      3  2026-11-22 12:03:00",
        "Julie      8  2026-11-22 12:03:00",
        "(2 rows)  read user_totals@v2",
    ]
    csv = cli(seed, capsys, "changes", "user_totals", "--to-version", "1", "--format", "csv")
    assert csv.splitlines()[0] == "name,total,time,_op,_undo,_mtime,_version,_batch_id,_emit_index"
    assert csv.splitlines()[1].startswith("Julie,7,2026-11-22 12:01:00,+I,false,")
    limited = cli(seed, capsys, "changes", "user_totals", "--limit", "1")
    assert limited.splitlines()[-1] == "(1 row)"


def test_cli_describe_and_history_print_the_apis_documents(seed, capsys):
    described = json.loads(cli(seed, capsys, "describe", "user_totals", "--json"))
    expected = seed.describe("user_totals")
    for info in (described, expected):
        info.pop("freshness_lag_s")
    assert described == expected
    history = [
        json.loads(line) for line in cli(seed, capsys, "history", "user_totals", "--json").splitlines()
    ]
    assert history == seed.history("user_totals")
    text = cli(seed, capsys, "history", "user_totals").splitlines()
    assert text[0].split() == ["version", "committed", "(UTC)", "batch", "kind", "changes", "inputs"]
    assert text[2].split()[3:] == ["1", "stream", "1", "user_scores@v1"]


def test_cli_changes_follow_prints_batches_as_they_land(seed, capsys):
    before = seed.changes("user_totals").count()

    def land() -> None:
        time.sleep(1)
        add_scores(seed, [("Otto", "green", 5, at("12:11"))])
        seed.refresh(["user_totals"])

    writer = threading.Thread(target=land)
    writer.start()
    try:  # --limit ends the follow once the new row is printed
        out = cli(
            seed,
            capsys,
            "changes",
            "user_totals",
            "--follow",
            "--interval",
            "200ms",
            "--limit",
            str(before + 1),
            "--format",
            "json",
        )
    finally:
        writer.join()
    last = json.loads(out.splitlines()[-1])
    assert (last["name"], last["_op"], last["total"]) == ("Otto", "+I", 5)


def test_cli_errors_are_one_line_without_traceback(seed, capsys):
    code = main(
        ["--project", str(seed.config.project_dir), "query", "SELECT * FROM user_totals VERSION AS OF 99"]
    )
    err = capsys.readouterr().err
    assert (
        code == 1 and err.startswith("Error: view user_totals has no version 99") and "Traceback" not in err
    )


def test_project_reads_need_no_spark_for_describe_and_history(seed, tmp_path: Path):
    fresh = Project.open(seed.config.project_dir)  # no session given: one would start on first need
    assert fresh.describe("user_totals")["version"] == seed.versions().latest("user_totals")
    assert fresh.history("large_team_totals")
    assert fresh._spark is None


# The JSON outputs are a public contract (DESIGN §5): fields are added, never renamed or dropped without an alias.
# Each output's fields as of this contract; a field missing from a document fails here, whatever else changed.
CONTRACT = {
    "describe view": {
        "name",
        "kind",
        "file",
        "line",
        "snapshot_path",
        "changelog_path",
        "state_path",
        "key",
        "changelog",
        "strategy",
        "reason",
        "inputs_declared",
        "columns",
        "refreshed",
        "version",
        "batch_id",
        "generation",
        "inputs",
        "source_versions",
        "row_count",
        "changelog_rows",
        "sizes",
        "state_rows",
        "state_ttl",
        "rows_expired",
        "last_refresh",
        "late_rows",
        "last_batch_expectations",
        "watermark",
        "stale_since",
        "freshness_lag_s",
        "expectations",
    },
    "describe source": {
        "name",
        "kind",
        "file",
        "line",
        "snapshot_path",
        "path",
        "changelog_path",
        "key",
        "append_only",
        "watermark",
        "idle_timeout_seconds",
        "strategy",
        "reason",
        "inputs",
        "columns",
        "exists",
        "version",
        "source_versions",
        "row_count",
        "sizes",
        "last_commit",
        "expectations",
    },
    "status": {
        "name",
        "kind",
        "strategy",
        "version",
        "behind",
        "lag_s",
        "last_time",
        "age_s",
        "rows_in",
        "rows_out",
        "batch_ms",
        "engine",
        "rows",
        "state_bytes",
        "problem",
        "reason",
    },
    "plan view": {
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
        "driver",
        "driver_reason",
        "emit",
        "event_time",
        "notes",
        "plan",
        "refresh_policy",
        "watermarks",
        "window",
    },
    "plan source": {"name", "path", "key", "append_only", "watermark"},
}


def test_issue_35_item_12_json_outputs_keep_every_contracted_field(seed, capsys):
    documents = {
        "describe view": [json.loads(cli(seed, capsys, "describe", "user_totals", "--json"))],
        "describe source": [json.loads(cli(seed, capsys, "describe", "user_scores", "--json"))],
        "status": json.loads(cli(seed, capsys, "status", "--json")),
    }
    plan = json.loads(cli(seed, capsys, "plan", "--json"))
    documents["plan view"], documents["plan source"] = plan["views"], plan["sources"]
    for output, fields in CONTRACT.items():
        assert documents[output], f"{output}: no document to check"
        for document in documents[output]:
            missing = fields - set(document)
            assert not missing, f"{output} lost the fields {sorted(missing)} of its JSON contract"
