"""Whether views need a refresh, from their Delta logs alone (delta-rs, no Spark): `mv refresh` with nothing to
do answers without starting a JVM."""

from __future__ import annotations

import hashlib

from mvengine.config import Config
from mvengine.plan.view_plan import ViewPlan
from mvengine.project.catalog import Catalog
from mvengine.project.layout import app_id, last_commit, source_table, view_tables
from mvengine.storage.tables import is_committed


def sql_hash(plan: ViewPlan) -> str:
    """Identifies what a view computes: its query (as sqlglot prints it, so comments and layout do not count),
    its column names, its strategy and the state it keeps (which changes when an input's append-only claim
    does: a MIN/MAX then needs its multiset), and the rows expectations drop from its inputs and from it."""
    text = "|".join(
        [
            plan.strategy,
            ",".join(c.name for c in plan.columns),
            plan.view.query.sql("spark"),
            plan.state,
            *plan.drops,
        ]
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def stale_views(config: Config, catalog: Catalog, plans: list[ViewPlan]) -> list[str]:
    """The views (of `plans`, in DAG order) that a refresh would write: never refreshed, SQL changed, a batch
    left unfinished, an input at a newer version than the view reflects, or a view it reads stale."""
    current: dict[str, int] = {}
    for name, source in catalog.sources.items():
        if any(name in p.inputs for p in plans):
            ref = source_table(source, config.storage_options)
            current[name] = ref.open().version() if ref.exists() else -1
    stale = []
    for plan in plans:
        snapshot = view_tables(plan, config.storage_options).snapshot
        last = last_commit(snapshot)
        if last is not None:
            current[plan.name] = last.version
        if (
            last is None
            or last.sql_hash != sql_hash(plan)
            or not is_committed(
                view_tables(plan, config.storage_options).changelog,
                app_id(plan.name, last.generation),
                last.batch_id,
            )
            or any(last.inputs.get(n) != current.get(n) or n in stale for n in plan.inputs)
        ):
            stale.append(plan.name)
    return stale
