"""Why a view's batch failed, in the user's terms: the failure Spark or delta-rs reports names the view's own
key or a missing file; the cause is usually in an input (a source that broke its declared PRIMARY KEY, a
version whose files VACUUM removed). Each function here looks for one cause, only once a batch has failed, and
returns the error to raise instead (None when the cause is not that)."""

from __future__ import annotations

import json
import os

import networkx as nx
import pyarrow.compute as pc

from mvengine.errors import DuplicateKeyError, MvError, StorageError
from mvengine.plan.view_plan import ViewPlan
from mvengine.project.layout import CommitRecord
from mvengine.runtime.context import RefreshContext
from mvengine.storage.api import read_arrow
from mvengine.storage.objects import is_local, local_path
from mvengine.storage.tables import TableRef

RETENTION = "delta.deletedFileRetentionDuration"
DISK_FULL = ("No space left on device", "os error 28", "Disk quota exceeded")
OUT_OF_MEMORY = ("java.lang.OutOfMemoryError", "Java heap space", "GC overhead limit exceeded")
MISSING_FILE = ("No such file", "not found", "FILE_NOT_EXIST", "does not exist", "FileNotFound")


def cause_of(
    ctx: RefreshContext,
    plan: ViewPlan,
    last: CommitRecord | None,
    cut: dict[str, int],
    during: str,
    error: BaseException,
) -> MvError | None:
    """The error to raise instead of `error`, which stopped the view's batch `during` (None: keep it)."""
    if isinstance(error, DuplicateKeyError):
        return duplicated_source_key(ctx, plan, cut, during)
    return (
        disk_full(plan, during, error)
        or out_of_memory(plan, during, error)
        or vacuumed_input(ctx, plan, last, cut, during, error)
    )


def out_of_memory(plan: ViewPlan, during: str, error: BaseException) -> MvError | None:
    if not any(words in str(error) for words in OUT_OF_MEMORY):
        return None
    return MvError(
        f"view {plan.name}: {during}: Spark ran out of memory",
        hint='give Spark more: [spark.conf] "spark.driver.memory" = "8g" in conf/mvengine.toml (local '
        "mode runs in the driver), or refresh more often so that batches stay small; then run mv "
        "refresh again: the batch is planned anew",
    )


def disk_full(plan: ViewPlan, during: str, error: BaseException) -> MvError | None:
    text = str(error)
    if not any(words in text for words in DISK_FULL):
        return None
    detail = next((line.strip() for line in text.splitlines() if any(w in line for w in DISK_FULL)), text)
    return MvError(
        f"view {plan.name}: {during}: the disk is full: {detail}",
        hint="free space where the warehouse is, then run mv refresh again: it finishes this batch (what "
        "it committed stays, the rest is written again)",
    )


def duplicated_source_key(
    ctx: RefreshContext, plan: ViewPlan, cut: dict[str, int], during: str
) -> MvError | None:
    """For a batch with two rows for one key of a keyed view: the first source the view reads (directly or
    through views) that holds a key of its declared PRIMARY KEY more than once at the batch's cut."""
    catalog = ctx.catalog
    for name in sorted(nx.ancestors(catalog.graph, plan.name)):
        source = catalog.sources.get(name)
        if source is None or not source.key or name not in cut:
            continue
        try:
            keys = read_arrow(ctx.source_ref(name), version=cut[name], columns=source.key)
        except StorageError:  # column mapping on an object store: not read on the driver
            continue
        counts = keys.group_by(list(source.key), use_threads=False).aggregate([([], "count_all")])
        twice = counts.filter(pc.greater(counts.column("count_all"), 1))
        if not twice.num_rows:
            continue
        shown = ", ".join(f"{name}.{c}={twice.column(c)[0].as_py()!r}" for c in source.key)
        return MvError(
            f"{source.file}:{source.line}: source {name} holds the key {shown} {twice.column('count_all')[0]} times "
            f"at version {cut[name]}, but declares it its PRIMARY KEY (NOT ENFORCED): view {plan.name} keeps one "
            f"row per key, so its {during} wrote nothing",
            hint=f"delete the extra rows from {name} (a key must be unique at every version), then run mv refresh "
            "again: the batch is planned anew up to the sources' newest versions; or drop the PRIMARY KEY from "
            f"its CREATE TABLE; as a last resort, mv refresh --full {plan.name} recomputes the view",
        )
    return None


def vacuumed_input(
    ctx: RefreshContext,
    plan: ViewPlan,
    last: CommitRecord | None,
    cut: dict[str, int],
    during: str,
    error: BaseException,
) -> MvError | None:
    """For a batch that failed on a missing file: the first source whose files the batch needs (those of the
    version the view last read, which the delta rules read the source as, and the changes since) were removed,
    by VACUUM as a rule. Local tables only."""
    if last is None or not any(word in str(error) for word in MISSING_FILE):
        return None
    for name in plan.inputs:
        if name not in ctx.catalog.sources or name not in last.inputs or name not in cut:
            continue
        ref = ctx.source_ref(name)
        gone = _missing_file(ref, last.inputs[name], cut[name])
        if gone is None:
            continue
        retention = ref.open().metadata().configuration.get(RETENTION, "interval 1 week, the default")
        return MvError(
            f"view {plan.name}: {during}: it reads source {name} as of version {last.inputs[name]} and its changes "
            f"since, but the file {gone} is gone: VACUUM removes the files of versions older than the table's "
            f"{RETENTION} ({retention}); nothing was written",
            hint=f"mv refresh --full {plan.name} recomputes the view from the source's latest version (and the "
            f"views over it); then keep {RETENTION} on {name} longer than the longest pause between "
            "refreshes, or VACUUM it with a longer RETAIN",
        )
    return None


def _missing_file(ref: TableRef, since: int, until: int) -> str | None:
    """A data file of version `since`, or a file of the changes of versions since+1..until, missing from disk."""
    if not is_local(ref.uri):
        return None
    root = local_path(ref.uri)
    try:
        files = ref.open(version=since).file_uris()
    except StorageError:
        return None
    for uri in files:
        path = uri.removeprefix("file://")
        if not os.path.exists(path):
            return path
    for version in range(since + 1, until + 1):
        try:
            with open(os.path.join(root, "_delta_log", f"{version:020d}.json"), encoding="utf-8") as log:
                actions = [json.loads(line) for line in log if line.strip()]
        except (OSError, ValueError):
            continue
        for action in actions:
            for kind in ("cdc", "add"):
                if kind in action and not os.path.exists(os.path.join(root, action[kind]["path"])):
                    return os.path.join(root, action[kind]["path"])
    return None
