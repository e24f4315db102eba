"""Exactly once under crashes (DESIGN.md §4): `mv refresh --continuous` runs in a child process that is killed
with SIGKILL (with its JVM) at random moments while the sources change; after a final refresh, every view still
equals its SQL at the versions it records, and replaying its changelog gives every snapshot version (so no
change is lost or doubled)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mvengine.project.catalog import load_catalog
from mvengine.project.config import load_config
from mvengine.runtime.refresh import Refresher, view_tables
from tests.test_refresh_differential import apply_commit, check_view, make_project

KILLS = int(os.environ.get("MV_CRASH_KILLS", "20"))


def start(project: Path) -> subprocess.Popen:
    return subprocess.Popen([str(Path(sys.executable).parent / "mv"), "--project", str(project), "refresh",
                             "--continuous", "--interval", "200ms"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def kill(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGKILL)  # the Python driver and its JVM together
    process.wait()


@pytest.mark.crash
def test_views_survive_sigkill_at_random_moments(spark, tmp_path: Path):
    rng = random.Random(20261122)
    project = make_project(tmp_path / "project")
    config = load_config(project)
    catalog = load_catalog(config)
    Refresher(spark, config, catalog).prepare_sources()
    for i in range(KILLS):
        child = start(project)
        deadline = time.monotonic() + rng.uniform(3, 14)
        while time.monotonic() < deadline:
            apply_commit(spark, catalog, _random_commit(rng, i))
            time.sleep(rng.uniform(0.2, 1.5))
        kill(child)
    # The children committed batches between kills (so kills landed while work was under way)...
    committed = sum(tables.snapshot.open().version() + 1 for tables in
                    (view_tables(p, {}) for p in catalog.plans.values()) if tables.snapshot.exists())
    assert committed > len(catalog.plans), "the killed refreshes never got past their first batch"
    print(f"{KILLS} kills; {committed} snapshot versions committed by the killed processes")
    # ...and after one more refresh, every view keeps the promise.
    refresher = Refresher(spark, config, catalog)
    refresher.refresh()
    for name in catalog.plans:
        check_view(spark, catalog, name)


def _random_commit(rng: random.Random, i: int):
    kind = rng.choice(["upsert_t", "delete_t", "insert_b", "delete_b"])
    group = rng.choice(["a", "b", "c", None])
    value = rng.choice([None, *range(-3, 6)])
    if kind == "upsert_t":
        return kind, [(rng.randrange(8), group, value)]
    if kind == "delete_t":
        return kind, [rng.randrange(8)]
    if kind == "insert_b":
        return kind, [(group, value), (rng.choice(["a", "b"]), i % 5)]
    return kind, (group, value)
