"""The project's declarations: every source in views/*.sql (views come with the SQL/plan issue)."""

from __future__ import annotations

from mvengine.errors import ConfigError, SqlError
from mvengine.project.config import Config
from mvengine.sql.files import read_sql_files
from mvengine.sql.sources import SourceDef, is_source, parse_source


def load_sources(config: Config) -> dict[str, SourceDef]:
    """Sources by name, in declaration order; a name declared twice is an error naming both places."""
    if not config.views_dir.is_dir():
        raise ConfigError(f"no views/ folder in {config.project_dir}",
                          hint="run mv from a project folder (one holding conf/ and views/) or pass --project DIR")
    sources: dict[str, SourceDef] = {}
    for statement in read_sql_files(config.views_dir):
        if not is_source(statement):
            continue
        source = parse_source(statement, config)
        if source.name in sources:
            first = sources[source.name]
            raise SqlError(f"{source.name!r} is already declared at {first.file}:{first.line}",
                           file=source.file, line=source.line, obj=f"source {source.name}",
                           hint="give one of them another name")
        sources[source.name] = source
    return sources
