"""conf/mvengine.toml, names, and source declarations in views/*.sql: values and every error message."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mvengine.config import load_config, redact_options
from mvengine.errors import ConfigError, InvalidNameError, SqlError
from mvengine.names import quote_identifier, validate_name
from mvengine.project.catalog import load_sources
from mvengine.runtime.catalog import catalog_tables


def project(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
    (tmp_path / "views").mkdir(exist_ok=True)
    return tmp_path


def test_defaults_without_a_config_file(tmp_path):
    config = load_config(project(tmp_path, {}))
    assert config.spark_master == "local[*]"
    assert config.warehouse == str(tmp_path.resolve() / "warehouse")
    assert config.spark_conf["spark.sql.session.timeZone"] == "UTC"
    assert config.refresh_interval_s == 1.0


def test_config_values_and_env_expansion(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_SECRET", "s3cr3t")
    config = load_config(
        project(
            tmp_path,
            {
                "conf/mvengine.toml": """
[project]
warehouse = "s3://bucket/wh"
[spark]
master = "local[2]"
[spark.conf]
"spark.sql.shuffle.partitions" = 8
[storage.options]
AWS_REGION = "eu-west-1"
AWS_SECRET_ACCESS_KEY = "${MY_SECRET}"
[refresh]
interval = "500ms"
"""
            },
        )
    )
    assert config.warehouse == "s3://bucket/wh"
    assert config.spark_conf["spark.sql.shuffle.partitions"] == "8"
    assert config.storage_options["AWS_SECRET_ACCESS_KEY"] == "s3cr3t"
    assert config.redacted_storage_options() == {"AWS_REGION": "eu-west-1", "AWS_SECRET_ACCESS_KEY": "***"}
    assert config.refresh_interval_s == 0.5
    assert (
        "spark.sql.catalogImplementation" not in config.spark_conf
    )  # no embedded metastore on an object store


@pytest.mark.parametrize(
    "text, message",
    [
        ("[spark]\nmastr = 'x'\n", r"mvengine.toml:2: unknown key 'mastr' in \[spark\]"),
        ("[sparky]\n", r"mvengine.toml:1: unknown section \[sparky\]"),
        ("[refresh]\ninterval = 'often'\n", r"mvengine.toml:2: invalid duration 'often'"),
        ("[spark\n", r"mvengine.toml: not valid TOML"),
        (
            "[storage.options]\nKEY = '${NOPE_NOT_SET}'\n",
            r"mvengine.toml:2: storage option 'KEY' refers to \$\{NOPE_NOT_SET\}",
        ),
        (
            "[catalog]\nschema = 'a.b.c'\n",
            r"mvengine.toml:2: \[catalog\] schema 'a.b.c' is not a schema's name",
        ),
        ("[catalog]\nregister = 'yes'\n", r"mvengine.toml:2: register must be true or false"),
    ],
)
def test_config_errors_name_file_and_line(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        load_config(project(tmp_path, {"conf/mvengine.toml": text}))


def test_secrets_are_redacted():
    assert redact_options({"azure_storage_sas_token": "t", "account_name": "a"}) == {
        "azure_storage_sas_token": "***",
        "account_name": "a",
    }


@pytest.mark.parametrize("name", ["../x", "a;DROP", "a b", "`x`", "x'y", "", "1abc", "a/b", "é", "a" * 129])
def test_unsafe_names_are_refused(name):
    with pytest.raises(InvalidNameError, match="names must start with a letter or underscore"):
        validate_name(name, "view name")


def test_identifiers_are_quoted():
    assert validate_name("user_scores") == "user_scores"
    assert quote_identifier("we`ird; DROP") == "`we``ird; DROP`"


SOURCES = """-- two sources
CREATE TABLE scores (
  name STRING NOT NULL, team STRING, score INT, ts TIMESTAMP, amount DECIMAL(12, 2),
  tags ARRAY<STRING>, attrs MAP<STRING, INT>, loc STRUCT<lat: DOUBLE, lon: DOUBLE>,
  PRIMARY KEY (name) NOT ENFORCED,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH ('path' = 'data/scores', 'append_only' = 'false');
/* a comment */ CREATE TABLE events (id BIGINT) WITH ('append_only' = 'true');
CREATE MATERIALIZED VIEW v AS SELECT team FROM scores;
"""


def test_sources_are_read_with_keys_watermarks_and_paths(tmp_path):
    root = project(tmp_path, {"views/a.sql": SOURCES})
    sources = load_sources(load_config(root))
    assert list(sources) == ["scores", "events"]
    scores, events = sources["scores"], sources["events"]
    assert scores.line == 2 and events.line == 8
    assert scores.key == ("name",) and not scores.append_only and events.append_only and events.key is None
    assert scores.path == str(root.resolve() / "data" / "scores")
    assert events.path == str(root.resolve() / "warehouse" / "sources" / "events")
    assert scores.watermark.column == "ts" and scores.watermark.expression == "ts - INTERVAL '5' SECOND"
    assert [str(f.type) for f in scores.schema] == [
        "string",
        "string",
        "int32",
        "timestamp[us, tz=UTC]",
        "decimal128(12, 2)",
        "list<item: string>",
        "map<string, int32>",
        "struct<lat: double, lon: double>",
    ]
    assert not scores.schema.field("name").nullable


@pytest.mark.parametrize(
    "files, message",
    [
        ({"views/a.sql": "CREATE TABLE t (a INT,\n b INT"}, r"a.sql:2.*syntax error"),
        (
            {"views/a.sql": "CREATE TABLE t (a INT, PRIMARY KEY (b) NOT ENFORCED);"},
            r"a.sql:1: source t: PRIMARY KEY names unknown column 'b'",
        ),
        (
            {"views/a.sql": "CREATE TABLE t (score INT, WATERMARK FOR scor AS scor - INTERVAL '1' SECOND);"},
            r"WATERMARK FOR names unknown column 'scor'\n  hint: did you mean score\?",
        ),
        (
            {"views/a.sql": "CREATE TABLE t (a INT);", "views/sub/b.sql": "\n\nCREATE TABLE t (b INT);"},
            r"b.sql:3: source t: 't' is already declared at .*a.sql:1",
        ),
        (
            {"views/a.sql": "CREATE TABLE t (a INT) WITH ('pth' = 'x');"},
            r"unknown WITH option\(s\) \['pth'\]",
        ),
        (
            {"views/a.sql": "CREATE TABLE t (a INT) WITH ('append_only' = 'yes');"},
            r"'append_only' must be 'true' or 'false'",
        ),
        ({"views/a.sql": "CREATE TABLE `a;DROP` (a INT);"}, r"source a;DROP: invalid source name 'a;DROP'"),
        ({"views/a.sql": "CREATE TABLE t (a INT, a STRING);"}, r"column 'a' is declared twice"),
        ({"views/a.sql": "CREATE TABLE t (a INTERVAL DAY);"}, r"column 'a' has unsupported type"),
        ({"views/a.sql": b"CREATE TABLE t (a INT);\n-- caf\xe9"}, r"a.sql:2: not UTF-8 text"),
        ({"views/a.sql": "CREATE TABLE t (a INT, WATERMARK ts);"}, r"a.sql:1:\d+: WATERMARK must read"),
        (
            {"views/a.sql": "CREATE TABLE t (a INT) WITH ('idle_timeout' = '1 minute');"},
            r"a.sql:1: source t: 'idle_timeout' is for a source with event time",
        ),
        (
            {
                "views/a.sql": "CREATE TABLE t (ts TIMESTAMP, WATERMARK FOR ts AS ts)\n"
                "WITH ('idle_timeout' = 'a while');"
            },
            r"a.sql:1: source t: cannot read idle_timeout 'a while'",
        ),
        (
            {"views/a.sql": "CREATE TABLE t (a INT) WITH ('table' = 'sales.t', 'path' = 'x');"},
            r"a.sql:1: source t: 'table' and 'path' both say where the table is",
        ),
        (
            {"views/a.sql": "CREATE TABLE t (a INT) WITH ('table' = 'orders');"},
            r"a.sql:1: source t: 'table' = 'orders' is not a catalog table's name",
        ),
        (
            {"views/a.sql": "CREATE TABLE t WITH ('append_only' = 'true');"},
            r"a.sql:1: source t: the CREATE TABLE declares no columns",
        ),
        (  # (the project's settings make an embedded metastore, which does not exist yet: no Spark is asked)
            {"views/a.sql": "CREATE TABLE t (PRIMARY KEY (id) NOT ENFORCED) WITH ('table' = 'sales.t');"},
            r"a.sql:1: source t: sales.t: there is no such table in Spark's catalog \(it has no metastore yet",
        ),
        (
            {"views/a.sql": "CREATE MATERIALIZED VIEW v AS\nSELECT * FROM\n  spark_catalog.sales.orders;"},
            r"a.sql:3:3: view v: sales.orders: there is no such table in Spark's catalog",
        ),
    ],
)
def test_source_errors_name_file_line_and_object(tmp_path, files, message):
    config = load_config(project(tmp_path, files))
    with pytest.raises(SqlError, match=message):
        load_sources(config, catalog_tables(config))
    assert not os.path.exists(config.warehouse)  # bad input writes nothing


def test_missing_views_folder(tmp_path):
    (tmp_path / "conf").mkdir()
    with pytest.raises(ConfigError, match="no views/ folder"):
        load_sources(load_config(tmp_path))
