"""`mv plan`: the DAG in dependency order and, per view, how it will be maintained (reading/explain.py)."""

from __future__ import annotations

import json

from mvengine.cli.console import Console
from mvengine.config import Config
from mvengine.errors import ConfigError
from mvengine.project.catalog import load_catalog
from mvengine.project.drift import source_drifts
from mvengine.reading.explain import describe, plan_document
from mvengine.runtime.catalog import catalog_tables


def print_plan(config: Config, console: Console, names: list[str], *, as_json: bool) -> int:
    catalog = load_catalog(config, catalog_tables(config))
    views = catalog.require(names) if names else [n for n in catalog.order if n in catalog.plans]
    for name in views:
        if name not in catalog.plans:
            raise ConfigError(f"{name} is a source, not a view", hint="`mv sources` lists the sources")
    drifts = source_drifts(catalog, catalog.sources, config.storage_options)
    if as_json:
        console.out(json.dumps(plan_document(catalog, views, drifts), indent=2))
        return 0
    console.out("order: " + " -> ".join(catalog.order))
    if not names and catalog.sources:
        console.out("")
        console.out("sources")
        width = max(len(s.name) for s in catalog.sources.values())
        for s in catalog.sources.values():
            mode = "append-only" if s.append_only else (f"key {', '.join(s.key)}" if s.key else "bag")
            watermark = f", watermark {s.watermark_shown()}" if s.watermark else ""
            table = f", catalog table {s.catalog_table}" if s.catalog_table else ""
            console.out(f"  {s.name:<{width}}  {mode}{watermark}{table}  ({s.file}:{s.line})")
            drift = drifts.get(s.name)
            if drift is not None and drift.added:
                added = ", ".join(drift.added)
                console.out(
                    f"  {'':<{width}}  ignores column(s) {added}: added by another writer, not declared"
                )
            if drift is not None and drift.breaks:
                console.out(f"  {'':<{width}}  {drift.problem()}: the views over it stop")
    for name in views:
        console.out("")
        for line in describe(catalog.plans[name], catalog):
            console.out(line)
    if not views:
        console.out("no views declared (write CREATE MATERIALIZED VIEW statements in views/)")
    return 0
