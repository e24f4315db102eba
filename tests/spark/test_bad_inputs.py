"""Hostile inputs (issue 18), table-driven: SQL files, configuration, names, paths, source data and the command
line. Each one, run as `mv` runs it (the CLI's `main`, in this process: a process per case cost a Python and
often a Spark start each; tests/system/test_cli.py runs the real `mv` for exit codes and signals), ends in exit code 1
and one `Error:` line that says where the problem is (file and line, or the object and path), no traceback
(Python's or Java's, on either file descriptor), and nothing written: no file of the project's folder is added
or changed.

Not errors, and tested as such: a source whose timestamps carry another time zone (Delta stores instants: the
view reads the same instants)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from mvengine.cli.main import main
from tests.system.test_cli import BIN

SOURCES = "CREATE TABLE scores (name STRING NOT NULL, team STRING, score INT, at TIMESTAMP);\n"
VIEW = "CREATE MATERIALIZED VIEW totals AS SELECT team, SUM(score) AS total FROM scores GROUP BY team;\n"
SCORES = pa.schema(
    [
        pa.field("name", pa.string(), nullable=False),
        pa.field("team", pa.string()),
        pa.field("score", pa.int32()),
        pa.field("at", pa.timestamp("us", tz="UTC")),
    ]
)


def _write(name: str, text: str | bytes) -> Callable[[Path], None]:
    def setup(root: Path) -> None:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text if isinstance(text, bytes) else text.encode())

    return setup


def _view(text: str) -> Callable[[Path], None]:
    return _write("views/totals.sql", text)


def _conf(text: str) -> Callable[[Path], None]:
    return _write("conf/mvengine.toml", text)


def _source_table(
    schema: pa.Schema, rows: list[dict], *, cdf: bool = True, path: str = "warehouse/sources/scores"
) -> Callable[[Path], None]:
    def setup(root: Path) -> None:
        write_deltalake(
            str(root / path),
            pa.Table.from_pylist(rows, schema=schema),
            configuration={"delta.enableChangeDataFeed": "true"} if cdf else None,
        )

    return setup


def _symlink(name: str, target: str) -> Callable[[Path], None]:
    def setup(root: Path) -> None:
        if (root / name).is_dir():
            shutil.rmtree(root / name)
        os.symlink(target, root / name)

    return setup


def _remove(name: str) -> Callable[[Path], None]:
    def setup(root: Path) -> None:
        shutil.rmtree(root / name)

    return setup


def _both(*setups: Callable[[Path], None]) -> Callable[[Path], None]:
    def setup(root: Path) -> None:
        for step in setups:
            step(root)

    return setup


# (id, set-up of the project, the command's arguments after `mv --project ROOT`, what the error line says)
CASES = [
    # -- SQL files
    (
        "syntax error",
        _view("CREATE MATERIALIZED VIEW totals AS SELEC team FROM scores;"),
        ["refresh"],
        "views/totals.sql:1",
    ),
    (
        "unknown column",
        _view("CREATE MATERIALIZED VIEW totals AS SELECT tema FROM scores;"),
        ["refresh"],
        "views/totals.sql:1",
    ),
    (
        "unknown table",
        _view("CREATE MATERIALIZED VIEW totals AS SELECT team FROM scorez;"),
        ["refresh"],
        "views/totals.sql:1",
    ),
    ("10 MB SQL file", _view("-- " + "x" * 10_000_000 + "\n" + VIEW), ["refresh"], "views/totals.sql"),
    (
        "NUL byte",
        _view("CREATE MATERIALIZED VIEW totals AS\nSELECT team\0 FROM scores;"),
        ["refresh"],
        "views/totals.sql:2",
    ),
    (
        "not UTF-8",
        _view(b"CREATE MATERIALIZED VIEW totals AS SELECT '\xff' AS x FROM scores;"),
        ["refresh"],
        "views/totals.sql:1",
    ),
    (
        "view named SELECT",
        _view("CREATE MATERIALIZED VIEW `select` AS SELECT team FROM scores;"),
        ["refresh"],
        "views/totals.sql:1",
    ),
    (
        "view named TABLE",
        _view("CREATE MATERIALIZED VIEW `table` AS SELECT team FROM scores;"),
        ["refresh"],
        "views/totals.sql:1",
    ),
    (
        "view named like a source",
        _view("CREATE MATERIALIZED VIEW scores AS SELECT team FROM scores;"),
        ["refresh"],
        "views/totals.sql:1",
    ),
    ("view named twice", _both(_view(VIEW), _write("views/again.sql", VIEW)), ["refresh"], "totals"),
    (
        "view reads itself",
        _view("CREATE MATERIALIZED VIEW totals AS SELECT * FROM totals;"),
        ["refresh"],
        "views/totals.sql:1",
    ),
    (
        "cycle of views",
        _view(
            "CREATE MATERIALIZED VIEW a1 AS SELECT * FROM b1;\n"
            "CREATE MATERIALIZED VIEW b1 AS SELECT * FROM a1;"
        ),
        ["refresh"],
        "views/totals.sql",
    ),
    (
        "view path outside the project",
        _view(
            "CREATE MATERIALIZED VIEW totals WITH ('path' = '../../elsewhere') AS SELECT team FROM scores;"
        ),
        ["refresh"],
        "views/totals.sql:1",
    ),
    (
        "source path outside the project",
        _write("views/sources.sql", SOURCES.replace(");", ") WITH ('path' = '../../../x');")),
        ["refresh"],
        "views/sources.sql:1",
    ),
    ("DROP statement", _view("DROP TABLE scores;"), ["refresh"], "views/totals.sql:1"),
    (
        "INSERT statement",
        _view("INSERT INTO scores VALUES ('a', 'b', 1, NULL);"),
        ["refresh"],
        "views/totals.sql:1",
    ),
    ("bare SELECT", _view("SELECT * FROM scores;"), ["refresh"], "views/totals.sql:1"),
    (
        "name with a slash",
        _view("CREATE MATERIALIZED VIEW `a/b` AS SELECT team FROM scores;"),
        ["refresh"],
        "views/totals.sql:1",
    ),
    (
        "name of 200 characters",
        _view(f"CREATE MATERIALIZED VIEW {'v' * 200} AS SELECT team FROM scores;"),
        ["refresh"],
        "views/totals.sql:1",
    ),
    (
        "column list of another length",
        _view("CREATE MATERIALIZED VIEW totals (a, b, c) AS SELECT team FROM scores;"),
        ["refresh"],
        "views/totals.sql:1",
    ),
    (
        "a changelog column name",
        _view("CREATE MATERIALIZED VIEW totals AS SELECT team AS _op FROM scores;"),
        ["refresh"],
        "views/totals.sql:1",
    ),
    (
        "unknown view option",
        _view("CREATE MATERIALIZED VIEW totals WITH ('colour' = 'red') AS SELECT team FROM scores;"),
        ["refresh"],
        "views/totals.sql:1",
    ),
    (
        "source column of an unsupported type",
        _write("views/sources.sql", "CREATE TABLE scores (name STRING, x INTERVAL DAY);"),
        ["refresh"],
        "views/sources.sql:1",
    ),
    (
        "source key on an unknown column",
        _write("views/sources.sql", SOURCES.replace(");", ", PRIMARY KEY (nam) NOT ENFORCED);")),
        ["refresh"],
        "views/sources.sql:1",
    ),
    (
        "source append_only neither true nor false",
        _write("views/sources.sql", SOURCES.replace(");", ") WITH ('append_only' = 'maybe');")),
        ["refresh"],
        "views/sources.sql:1",
    ),
    # issue 35, item 8: a typo in a declared path is not a new, empty table
    (
        "issue 35 item 8 source path with a typo",
        _both(
            _write("views/sources.sql", SOURCES.replace(");", ") WITH ('path' = 'data/scorse');")),
            _source_table(SCORES, [], path="data/scores"),
        ),
        ["refresh"],
        "the nearest existing folder is",
    ),
    # issue 35, item 9: a mistake in a view's SELECT, at its line and column, with the word meant
    (
        "issue 35 item 9 FORM for FROM",
        _view("CREATE MATERIALIZED VIEW totals AS\nSELECT team FORM scores;"),
        ["plan"],
        "views/totals.sql:2:13: syntax error: unexpected 'FORM'",
    ),
    (
        "issue 35 item 9 GRUOP BY",
        _view("CREATE MATERIALIZED VIEW totals AS\nSELECT team, SUM(score) AS s FROM scores GRUOP BY team;"),
        ["plan"],
        "did you mean GROUP?",
    ),
    (
        "issue 35 item 9 a missing comma",
        _view("CREATE MATERIALIZED VIEW totals AS\nSELECT team SUM(score) AS s FROM scores GROUP BY team;"),
        ["plan"],
        "views/totals.sql:2:",
    ),
    # -- configuration
    ("config not TOML", _conf("[refresh\ninterval = 1s"), ["refresh"], "conf/mvengine.toml"),
    ("config unknown key", _conf("[refresh]\nintervall = '1s'\n"), ["refresh"], "conf/mvengine.toml:2"),
    ("config unknown section", _conf("[refreshing]\ninterval = '1s'\n"), ["refresh"], "conf/mvengine.toml:1"),
    ("config bad duration", _conf("[refresh]\ninterval = 'soon'\n"), ["refresh"], "conf/mvengine.toml:2"),
    (
        "config share above 1",
        _conf("[refresh]\nrecompute_above = 2.5\n"),
        ["refresh"],
        "conf/mvengine.toml:2",
    ),
    (
        "config negative count",
        _conf("[refresh]\ndriver_max_changes = -1\n"),
        ["refresh"],
        "conf/mvengine.toml:2",
    ),
    (
        "config ${UNSET}",
        _conf("[storage.options]\naws_access_key_id = '${MV_SURELY_UNSET}'\n"),
        ["refresh"],
        "MV_SURELY_UNSET",
    ),
    (
        "config wrong type",
        _conf("[plan]\nrequire_bounded_state = 'yes'\n"),
        ["refresh"],
        "conf/mvengine.toml:2",
    ),
    ("config NUL byte", _conf("[refresh]\ninterval = '1s'\0\n"), ["refresh"], "conf/mvengine.toml"),
    # issue 35, item 10: refused when read, not by Spark later
    (
        "issue 35 item 10 master = 4",
        _conf("[spark]\nmaster = 4\n"),
        ["query", "SELECT * FROM totals"],
        "conf/mvengine.toml:2: [spark] master must be a Spark master URL",
    ),
    # -- paths
    (
        "no such project",
        lambda root: None,
        ["--project", "/nonexistent/project", "refresh"],
        "/nonexistent/project",
    ),
    ("project is a file", _write("afile", "x"), ["--project", "{root}/afile", "refresh"], "afile"),
    ("views/ missing", _remove("views"), ["refresh"], "views"),
    ("views/ is a file", _both(_remove("views"), _write("views", "x")), ["refresh"], "views"),
    ("views/ a dangling symlink", _symlink("views", "/nonexistent/views"), ["refresh"], "views"),
    (
        "warehouse is a file",
        _both(_conf("[project]\nwarehouse = 'wh'\n"), _write("wh", "x")),
        ["refresh"],
        "wh",
    ),
    (
        "source path is a file",
        _both(
            _write(
                "views/sources.sql",
                "CREATE TABLE scores (name STRING NOT NULL, team "
                "STRING, score INT, at TIMESTAMP) WITH ('path' = 'data.txt');",
            ),
            _write("data.txt", "x"),
        ),
        ["refresh"],
        "data.txt",
    ),
    # -- source data
    (
        "source not a Delta table",
        _write("warehouse/sources/scores/part-0.parquet", b"PAR1"),
        ["refresh"],
        "scores",
    ),
    ("source without change data feed", _source_table(SCORES, [], cdf=False), ["refresh"], "scores"),
    (
        "source with other columns",
        _source_table(pa.schema([pa.field("name", pa.string(), nullable=False)]), []),
        ["refresh"],
        "views/sources.sql:1",
    ),
    (
        "source timestamps without a time zone",
        _source_table(pa.schema([*list(SCORES)[:3], pa.field("at", pa.timestamp("us"))]), []),
        ["refresh"],
        "views/sources.sql:1",
    ),
    # -- the command line
    ("refresh an unknown view", lambda root: None, ["refresh", "totalz"], "totalz"),
    ("refresh a source", lambda root: None, ["refresh", "scores"], "scores"),
    ("query syntax", lambda root: None, ["query", "SELEC * FROM totals"], "SELEC"),
    ("query unknown table", lambda root: None, ["query", "SELECT * FROM nowhere"], "nowhere"),
    ("changes of an unknown view", lambda root: None, ["changes", "nowhere"], "nowhere"),
    ("negative version", lambda root: None, ["query", "SELECT * FROM totals VERSION AS OF -1"], "totals"),
]


@pytest.mark.parametrize("setup, args, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_hostile_input_is_one_located_error_and_writes_nothing(
    spark, tmp_path, capfd, setup, args, expected
):
    root = tmp_path / "project"
    (root / "views").mkdir(parents=True)
    (root / "views" / "sources.sql").write_text(SOURCES)
    (root / "views" / "totals.sql").write_text(VIEW)
    setup(root)
    before = _tree(tmp_path)
    args = [a.replace("{root}", str(root)) for a in args]
    capfd.readouterr()
    code = main([*([] if args[0] == "--project" else ["--project", str(root)]), *args], prog="mv")
    out, err = capfd.readouterr()
    output = out + err
    assert code == 1, output
    errors = [line for line in err.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, output
    assert expected in err, output
    assert "Traceback" not in output and "internal error" not in output and "\tat " not in output, output
    assert _tree(tmp_path) == before, "the command wrote files"


def test_there_are_at_least_forty_cases():
    assert len(CASES) >= 40


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if not p.is_symlink() or p.exists())


def test_source_timestamps_in_another_time_zone_are_the_same_instants(spark, tmp_path):
    from datetime import UTC, datetime

    from mvengine.config import load_config
    from mvengine.project.catalog import load_catalog
    from mvengine.runtime.refresh import Refresher, view_tables

    root = tmp_path / "project"
    (root / "views").mkdir(parents=True)
    (root / "views" / "sources.sql").write_text(SOURCES)
    (root / "views" / "late.sql").write_text(
        "CREATE MATERIALIZED VIEW late AS SELECT name, at FROM scores "
        "WHERE at > TIMESTAMP '2026-11-23 12:00:00';\n"
    )
    new_york = pa.schema([*list(SCORES)[:3], pa.field("at", pa.timestamp("us", tz="America/New_York"))])
    instant = datetime(2026, 11, 23, 13, 0, tzinfo=UTC)  # 08:00 in New York
    _source_table(new_york, [{"name": "a", "team": "x", "score": 1, "at": instant}])(root)
    config = load_config(root)
    catalog = load_catalog(config)
    Refresher(spark, config, catalog).refresh()
    snapshot = spark.read.format("delta").load(view_tables(catalog.plans["late"], {}).snapshot.uri)
    assert [
        (r["name"], r["at"].astimezone(UTC) if r["at"].tzinfo else r["at"]) for r in snapshot.collect()
    ] == [("a", spark.createDataFrame([(instant,)], "at timestamp").collect()[0]["at"])]


def test_a_read_only_warehouse_is_one_located_error(tmp_path):
    root = tmp_path / "project"
    (root / "views").mkdir(parents=True)
    (root / "views" / "sources.sql").write_text(SOURCES)
    (root / "views" / "totals.sql").write_text(VIEW)
    (root / "warehouse").mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(root / "warehouse")],
        check=False,
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:  # as root, a read-only folder is still writable: it takes a read-only mount
        pytest.skip(f"mounting a read-only tmpfs needs root (CAP_SYS_ADMIN): {mounted.stderr.strip()}")
    try:
        result = subprocess.run(
            [str(BIN / "mv"), "--project", str(root), "refresh"],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    finally:
        subprocess.run(["umount", "-l", str(root / "warehouse")], check=False, capture_output=True)
    assert result.returncode == 1, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert (
        len(errors) == 1 and "Read-only file system" in errors[0] and str(root / "warehouse") in errors[0]
    ), result.stderr
    assert "Traceback" not in result.stderr
