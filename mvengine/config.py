"""Loading conf/mvengine.toml into a typed, validated Config.

Unknown keys are errors (a typo must not silently fall back to a default), reported with file and line.
Storage options may reference environment variables as `${NAME}` so secrets stay out of the file; their
values are never printed (see `Config.redacted_storage_options`).
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mvengine.errors import ConfigError, SqlError
from mvengine.policy import DEFAULT_POLICY, ExecutionPolicy

CONFIG_PATH = Path("conf") / "mvengine.toml"
DEFAULT_SPARK_CONF: dict[str, str] = {
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    # Spark's own Parquet writes of mvengine's tables (storage/spark_files.py) in the timestamps Delta and
    # delta-rs write, whose footers keep the statistics (INT96, Spark's default, has none).
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.pyspark.fallback.enabled": "false",
    "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
    "spark.python.worker.reuse": "true",
    "spark.sql.python.filterPushdown.enabled": "true",
    # Storage options travel to executors as data source options (storage.AWS_SECRET_ACCESS_KEY, ...): their
    # values are redacted wherever Spark shows options or settings (plans, the UI's environment, event logs).
    "spark.redaction.regex": "(?i)secret|password|token|access[._]?key|credential|signature|sas",
    "spark.sql.redaction.options.regex": "(?i)url|secret|password|token|access[._]?key|credential|signature|sas",
}


@dataclass(frozen=True)
class Setting:
    """One key of conf/mvengine.toml. The loader's check of known keys, `mv init`'s commented file
    (scaffold.py) and the configuration reference (docs/reference/config.md) are all made from SETTINGS."""

    section: str
    key: str
    type: str  # what the value is, in words
    default: str  # the default, as TOML writes it
    meaning: str
    examples: tuple[str, ...] = ()  # a table's example lines, as TOML writes them

    @property
    def is_table(self) -> bool:
        return bool(self.examples)


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "project",
        "warehouse",
        "string: a folder, an absolute path or a URI",
        '"warehouse"',
        "Where source tables (under sources/) and every view's tables live: a folder relative to the project, "
        "an absolute path, or an object-store URI such as s3://bucket/warehouse.",
    ),
    Setting(
        "spark",
        "master",
        "string: a Spark master URL",
        '"local[*]"',
        "Any Spark master URL, as a string: local, local[N], local[*], spark://host:7077, yarn, k8s://... "
        "(anything else, such as master = 4, is an error naming the line). On a cluster, every executor needs "
        "the driver's Python version with mvengine and its dependencies installed.",
    ),
    Setting(
        "spark",
        "log_level",
        "string: ERROR, WARN or INFO",
        '"ERROR"',
        "Level of Spark's own logging.",
    ),
    Setting(
        "spark",
        "conf",
        "table of strings",
        "mvengine's defaults (below)",
        "Any Spark setting, applied over mvengine's defaults (4 shuffle partitions, UI off, UTC session time "
        "zone).",
        ('"spark.sql.shuffle.partitions" = "4"', '"spark.driver.memory" = "4g"'),
    ),
    Setting(
        "storage",
        "options",
        "table of strings",
        "none",
        'delta-rs object-store options, e.g. for S3. Write secrets as "${ENV_VAR}" to keep them out of this '
        "file (an unset variable is an error naming the line); values of keys that look like secrets are never "
        "printed (***).",
        ('AWS_REGION = "eu-west-1"', 'AWS_SECRET_ACCESS_KEY = "${AWS_SECRET_ACCESS_KEY}"'),
    ),
    Setting(
        "refresh",
        "interval",
        "duration: 500ms, 1s, 2m, 1h",
        '"1s"',
        "How often `mv refresh --continuous` looks for new input commits.",
    ),
    Setting(
        "refresh",
        "recompute_above",
        "number from 0 to 1",
        str(DEFAULT_POLICY.recompute_above),
        "A view under refresh_policy 'auto' is recomputed instead of maintained in a batch computed on the "
        "driver that changes more than this share of its inputs' rows (its change rows: an update counts "
        'twice), and at least recompute_min_changes rows. Measured in benchmarks/README.md, "Incremental or '
        'full".',
    ),
    Setting(
        "refresh",
        "recompute_above_in_spark",
        "number from 0 to 1",
        str(DEFAULT_POLICY.recompute_above_in_spark),
        "The same share, for a batch too large for the driver (computed by Spark).",
    ),
    Setting(
        "refresh",
        "recompute_min_changes",
        "whole number of rows",
        str(DEFAULT_POLICY.recompute_min_changes),
        "A batch of fewer changed rows is never recomputed by cost.",
    ),
    Setting(
        "refresh",
        "driver_max_changes",
        "whole number of rows",
        str(DEFAULT_POLICY.driver_max_changes),
        "A batch whose inputs changed by at most this many rows is computed on the driver, without Spark, when "
        "the view's expressions allow it (mv plan says whether they do), and so is a view's bootstrap over "
        "inputs of at most this many rows in all; 0 sends every batch to Spark.",
    ),
    Setting(
        "plan",
        "require_bounded_state",
        "true or false",
        "false",
        "true: a view whose state grows without bound is an error (see `mv plan`).",
    ),
    Setting(
        "serve",
        "queries",
        "true or false",
        "true",
        "Whether `mv refresh --continuous` and `mv ui` serve their running Spark to `mv query` and `mv changes` "
        "(Spark Connect on loopback, behind a token in a file only the warehouse's owner reads), so a query "
        "starts no Spark of its own while they run. false: every query starts its own.",
    ),
    Setting(
        "catalog",
        "register",
        "true or false",
        "true",
        "Whether every view's snapshot and changelog are registered in Spark's catalog, as `<schema>.<view>` "
        "and `<schema>.<view>_changelog`, so any Spark session on the same metastore reads them by name (time "
        "travel included). Each is registered once, by the refresh that first commits it. The catalog is Spark's "
        "session catalog on an embedded Derby metastore in `<warehouse>/_catalog` unless [spark.conf] names "
        "another (a Hive metastore service, Unity Catalog, Glue); an in-memory catalog registers nothing.",
    ),
    Setting(
        "catalog",
        "schema",
        "string: schema or catalog.schema",
        '"mv"',
        "The schema the views are registered in (created when missing).",
    ),
    Setting(
        "lineage",
        "transport",
        "table: an OpenLineage transport",
        "none (no events)",
        "Where every committed batch's OpenLineage run event goes (openlineage-python's transports, as its "
        'own config names them): type = "file" with log_file_path (relative to the project) and append = true, '
        'or type = "http" with url (and endpoint, timeout, auth ...).',
        ('type = "file"', 'log_file_path = "lineage/events.jsonl"', "append = true"),
    ),
    Setting(
        "lineage",
        "namespace",
        "string",
        '"mvengine"',
        "The OpenLineage namespace of the jobs (one per view).",
    ),
)
_KNOWN: dict[str, set[str]] = {
    section: {s.key for s in SETTINGS if s.section == section}
    for section in dict.fromkeys(s.section for s in SETTINGS)
}
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SECRET_HINTS = ("secret", "key", "token", "password", "credential", "sas", "signature")


@dataclass(frozen=True)
class Config:
    """What conf/mvengine.toml says, with defaults filled in. Paths are absolute."""

    project_dir: Path
    warehouse: str
    spark_master: str = "local[*]"
    spark_conf: dict[str, str] = field(default_factory=dict)
    spark_log_level: str = "ERROR"
    storage_options: dict[str, str] = field(default_factory=dict)
    refresh_interval_s: float = 1.0
    policy: ExecutionPolicy = DEFAULT_POLICY  # [refresh]'s thresholds: where batches run (policy.py)
    require_bounded_state: bool = False  # [plan]: views whose state grows without bound are errors
    serve_queries: bool = True  # [serve] queries: long-running commands serve their Spark (connect.py)
    lineage_transport: dict[str, Any] | None = None  # [lineage] transport: OpenLineage events (lineage.py)
    lineage_namespace: str = "mvengine"
    catalog_register: bool = (
        True  # [catalog] register: the views' tables as catalog tables (runtime/catalog.py)
    )
    catalog_schema: str = "mv"

    @property
    def views_dir(self) -> Path:
        return self.project_dir / "views"

    def sources_dir(self) -> str:
        return join_uri(self.warehouse, "sources")

    def resolve_path(self, path: str) -> str:
        return resolve_path(self.project_dir, path)

    def table_path(self, path: str, where: dict) -> str:
        """A view's or source's 'path' option, resolved: a relative path must stay inside the project (an
        absolute path or a URI says plainly where it goes; `../` would do so by accident)."""
        resolved = resolve_path(self.project_dir, path)
        if (
            "://" not in path
            and not os.path.isabs(path)
            and not Path(resolved).is_relative_to(self.project_dir)
        ):
            raise SqlError(
                f"'path' = {path!r} leads outside the project folder, to {resolved}",
                **where,
                hint="give a path inside the project, or an absolute path (or URI) if the table "
                "really lives elsewhere",
            )
        return resolved

    def redacted_storage_options(self) -> dict[str, str]:
        return redact_options(self.storage_options)


def load_config(project_dir: str | os.PathLike[str] = ".") -> Config:
    """Read `<project_dir>/conf/mvengine.toml`; a missing file means all defaults."""
    root = Path(project_dir).resolve()
    if not root.is_dir():
        raise ConfigError(
            f"project folder {root} does not exist",
            hint="pass --project DIR with a folder that holds conf/ and views/",
        )
    path = root / CONFIG_PATH
    data: dict[str, Any] = {}
    text = ""
    if path.exists():
        text = path.read_text(encoding="utf-8")
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(
                f"not valid TOML: {e}",
                file=str(path),
                hint="fix the syntax; docs/reference/config.md lists every key",
            ) from None
        _check_keys(data, text, str(path))
    project = data.get("project", {})
    spark = data.get("spark", {})
    storage = data.get("storage", {})
    refresh = data.get("refresh", {})
    plan = data.get("plan", {})
    require_bounded = _flag(plan, "require_bounded_state", False, str(path), text)
    serve_queries = _flag(data.get("serve", {}), "queries", True, str(path), text)
    lineage = data.get("lineage", {})
    catalog = data.get("catalog", {})
    transport = lineage.get("transport") or None  # (an empty [lineage.transport]: none)
    if transport is not None and not (isinstance(transport, dict) and isinstance(transport.get("type"), str)):
        raise ConfigError(
            "[lineage] transport must be a table with a type",
            file=str(path),
            line=_line_of(text, "transport"),
            hint='transport = { type = "file", log_file_path = "lineage.jsonl", append = true }',
        )
    if transport is not None and transport["type"] == "file" and "log_file_path" in transport:
        transport = dict(transport, log_file_path=resolve_path(root, str(transport["log_file_path"])))
    warehouse = resolve_path(root, str(project.get("warehouse", "warehouse")))
    conf = dict(DEFAULT_SPARK_CONF)
    conf.update(metastore_defaults(warehouse))
    conf.update(
        {str(k): _scalar(v, f"spark.conf.{k}", text, str(path)) for k, v in spark.get("conf", {}).items()}
    )
    options = {
        str(k): _expand_env(_scalar(v, f"storage.options.{k}", text, str(path)), str(k), str(path), text)
        for k, v in storage.get("options", {}).items()
    }
    if os.path.exists(warehouse) and not os.path.isdir(warehouse):
        raise ConfigError(
            f"the warehouse {warehouse} is a file, not a folder",
            file=str(path),
            line=_line_of(text, "warehouse") if text else None,
            hint="set [project] warehouse to a folder (it is made when missing)",
        )
    return Config(
        project_dir=root,
        warehouse=warehouse,
        spark_master=_master(spark, str(path), text),
        spark_conf=conf,
        spark_log_level=str(spark.get("log_level", "ERROR")).upper(),
        storage_options=options,
        refresh_interval_s=parse_duration(
            str(refresh.get("interval", "1s")), file=str(path), line=_line_of(text, "interval")
        ),
        require_bounded_state=require_bounded,
        serve_queries=serve_queries,
        lineage_transport=transport,
        lineage_namespace=str(lineage.get("namespace", "mvengine")),
        catalog_register=_flag(catalog, "register", True, str(path), text),
        catalog_schema=_catalog_schema(catalog, str(path), text),
        policy=ExecutionPolicy(
            recompute_above=_share(
                refresh, "recompute_above", DEFAULT_POLICY.recompute_above, str(path), text
            ),
            recompute_above_in_spark=_share(
                refresh, "recompute_above_in_spark", DEFAULT_POLICY.recompute_above_in_spark, str(path), text
            ),
            recompute_min_changes=_count(
                refresh, "recompute_min_changes", DEFAULT_POLICY.recompute_min_changes, str(path), text
            ),
            driver_max_changes=_count(
                refresh, "driver_max_changes", DEFAULT_POLICY.driver_max_changes, str(path), text
            ),
        ),
    )


def metastore_defaults(warehouse: str) -> dict[str, str]:
    """Spark's session catalog on an embedded Derby metastore in `<warehouse>/_catalog`, with the warehouse as
    the folder of its managed tables: what a local project's catalog is unless [spark.conf] says otherwise. An
    object-store warehouse gets none (Derby keeps its files on a local disk): Spark's in-memory catalog, or the
    one [spark.conf] sets."""
    if "://" in warehouse.removeprefix("file:"):
        return {}
    folder = os.path.join(warehouse.removeprefix("file:"), "_catalog")
    return {
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": warehouse,
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={folder}/metastore_db;create=true",
        # A new metastore makes its own tables; Hive's check of their version is for shared metastores.
        "spark.hadoop.datanucleus.schema.autoCreateAll": "true",
        "spark.hadoop.hive.metastore.schema.verification": "false",
    }


def derby_database(spark_conf: dict[str, str]) -> str | None:
    """The folder of the embedded Derby database the settings' metastore connection names, if it names one."""
    url = spark_conf.get("spark.hadoop.javax.jdo.option.ConnectionURL", "")
    m = re.match(r"jdbc:derby:;databaseName=([^;]+)", url)
    return m.group(1) if m else None


def _catalog_schema(section: dict, file: str, text: str) -> str:
    value = section.get("schema", "mv")
    parts = value.split(".") if isinstance(value, str) else []
    if not 1 <= len(parts) <= 2 or not all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", p) for p in parts):
        raise ConfigError(
            f"[catalog] schema {value!r} is not a schema's name",
            file=file,
            line=_line_of(text, "schema"),
            hint='write a schema (schema = "mv") or a catalog and schema (schema = "unity.mv")',
        )
    return value


def _flag(section: dict, key: str, default: bool, file: str, text: str) -> bool:
    value = section.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"{key} must be true or false", file=file, line=_line_of(text, key))
    return value


# What Spark takes as a master URL (sc:// too: session.py refuses it with what to set instead).
_MASTER = re.compile(
    r"local(\[(\*|[1-9]\d*)(,\s*[1-9]\d*)?\])?|local-cluster\[\d+,\s*\d+,\s*\d+\]"
    r"|spark://[^\s/]+(:\d+)?(,[^\s/]+(:\d+)?)*|yarn|k8s://\S+|sc://\S+"
)


def _master(section: dict, file: str, text: str) -> str:
    value = section.get("master", "local[*]")
    if not isinstance(value, str) or not _MASTER.fullmatch(value.strip()):
        raise ConfigError(
            f"[spark] master must be a Spark master URL, not {value!r}",
            file=file,
            line=_line_of(text, "master"),
            hint='e.g. master = "local[*]" (every core here), "local[4]", or '
            '"spark://host:7077" for a standalone cluster (a string, in quotes)',
        )
    return value.strip()


def _count(section: dict, key: str, default: int, file: str, text: str) -> int:
    value = section.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(
            f"[refresh] {key} must be a whole number of rows, not {value!r}",
            file=file,
            line=_line_of(text, key),
            hint=f"e.g. {key} = {default}",
        )
    return value


def _share(section: dict, key: str, default: float, file: str, text: str) -> float:
    value = section.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ConfigError(
            f"[refresh] {key} must be a number from 0 to 1, not {value!r}",
            file=file,
            line=_line_of(text, key),
            hint=f"write a share of the inputs' rows, e.g. {key} = {default}",
        )
    return float(value)


def resolve_path(project_dir: Path, path: str) -> str:
    """A table path from the project: URIs stay as they are, relative paths are under the project dir."""
    if "://" in path or os.path.isabs(path):
        return path
    return str((project_dir / path).resolve())


def parse_duration(text: str, *, file: str | None = None, line: int | None = None) -> float:
    """'500ms', '1s', '2m', '1h' -> seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)\s*", text)
    if not m:
        raise ConfigError(
            f"invalid duration {text!r}",
            file=file,
            line=line,
            hint="write a number with a unit: 500ms, 1s, 2m or 1h",
        )
    return float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def join_uri(base: str, *parts: str) -> str:
    """Join path segments onto a local path or a URI (s3://bucket/x) without normalising the scheme."""
    out = base.rstrip("/")
    for p in parts:
        out += "/" + p.strip("/")
    return out


def redact_options(options: dict[str, str]) -> dict[str, str]:
    """Storage options with every value that may be a secret replaced by '***'."""
    return {k: ("***" if any(h in k.lower() for h in _SECRET_HINTS) else v) for k, v in options.items()}


def redact_text(text: str, options: dict[str, str]) -> str:
    """`text` with the value of every storage option that may be a secret replaced by '***'."""
    for key, value in options.items():
        if value and redact_options({key: value})[key] == "***":
            text = text.replace(value, "***")
    return text


def _check_keys(data: dict[str, Any], text: str, file: str) -> None:
    for section, value in data.items():
        if section not in _KNOWN:
            raise ConfigError(
                f"unknown section [{section}]",
                file=file,
                line=_line_of(text, section),
                hint=f"known sections: {', '.join('[' + s + ']' for s in _KNOWN)}",
            )
        if not isinstance(value, dict):
            raise ConfigError(
                f"{section} must be a table ([{section}])", file=file, line=_line_of(text, section)
            )
        for key in value:
            if key not in _KNOWN[section]:
                raise ConfigError(
                    f"unknown key {key!r} in [{section}]",
                    file=file,
                    line=_line_of(text, key),
                    hint=f"known keys: {', '.join(sorted(_KNOWN[section]))}",
                )


def _scalar(value: Any, key: str, text: str, file: str) -> str:
    if isinstance(value, (dict, list)):
        raise ConfigError(
            f"{key} must be a string, number or boolean",
            file=file,
            line=_line_of(text, key.rsplit(".", 1)[-1]),
        )
    return str(value).lower() if isinstance(value, bool) else str(value)


def _expand_env(value: str, key: str, file: str, text: str) -> str:
    def repl(m: re.Match[str]) -> str:
        if m.group(1) not in os.environ:
            raise ConfigError(
                f"storage option {key!r} refers to ${{{m.group(1)}}}, which is not set",
                file=file,
                line=_line_of(text, key),
                hint=f"export {m.group(1)}=... before running mv",
            )
        return os.environ[m.group(1)]

    return _ENV_REF.sub(repl, value)


def _line_of(text: str, key: str) -> int | None:
    pattern = re.compile(r'^\s*(\[\s*)?"?' + re.escape(key) + r'"?\s*(=|\]|\.)', re.MULTILINE)
    m = pattern.search(text)
    return text.count("\n", 0, m.start()) + 1 if m else None
