"""`mv validate` and `mv quarantine`: the expectations on whole tables, and the rows QUARANTINE refused
(runtime/quarantine.py)."""

from __future__ import annotations

import json

from mvengine.api import Project
from mvengine.cli.console import Console
from mvengine.runtime.quarantine import QUARANTINE_COLUMNS, quarantine_table, quarantined, replay, validate


def run_validate(project: Project, console: Console, names: list[str], *, as_json: bool) -> int:
    """Exit 1 when a FAIL UPDATE expectation fails (the next refresh would stop on it), so that a script can
    stop too; the other outcomes are what their expectations do with failing rows."""
    outcomes = validate(project.config, project.catalog, names, lambda: project.spark)
    if as_json:
        console.out(json.dumps([o.to_json() | {"sample": o.sample} for o in outcomes], indent=2, default=str))
    elif outcomes:
        console.table(
            ["table", "expectation", "on violation", "rows", "failed"],
            [[o.table, o.name, o.on_violation, str(o.checked), str(o.failed)] for o in outcomes],
        )
        failed = [o for o in outcomes if o.failed]
        console.out(
            f"{len(failed)} of {len(outcomes)} expectations found failing rows"
            if failed
            else f"all {len(outcomes)} expectations hold"
        )
    else:
        console.out("no expectations declared" + (f" on {', '.join(names)}" if names else ""))
    return 1 if any(o.failed and o.on_violation == "FAIL UPDATE" for o in outcomes) else 0


def run_quarantine(project: Project, console: Console, name: str, *, do_replay: bool, as_json: bool) -> int:
    config, catalog = project.config, project.catalog
    if do_replay:
        done = replay(config, catalog, name, lambda: project.spark)
        kind = "source" if catalog.find(name) in catalog.sources else "view"
        what = (
            f"{done.replayed} rows written back into source {done.table}"
            if kind == "source"
            else f"{done.replayed} rows pass now and left the quarantine (view {done.table} holds them once "
            "it is recomputed: its expectation changed, so mv refresh does)"
        )
        console.out(f"{what}; {done.kept} rows still fail and stay in quarantine")
        return 0
    rows = quarantined(config, catalog, name)
    where = quarantine_table(config, catalog, name).uri
    if rows is None or rows.num_rows == 0:
        console.out(f"no quarantined rows ({where})")
        return 0
    if as_json:
        for row in rows.to_pylist():
            console.out(json.dumps(row, default=str))
        return 0
    columns = [c for c in rows.column_names if c not in QUARANTINE_COLUMNS] + list(QUARANTINE_COLUMNS)
    console.table(
        columns,
        [
            ["NULL" if row[c] is None else str(row[c]) for c in columns]
            for row in rows.select(columns).to_pylist()
        ],
    )
    console.out(f"({rows.num_rows} row{'s' if rows.num_rows != 1 else ''})  {where}")
    return 0
