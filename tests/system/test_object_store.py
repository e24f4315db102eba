"""Every table of a project on an S3-compatible object store (moto's server on loopback: tests/conftest.py,
`object_store`): the quickstart's commands, concurrent refreshes and the lease that keeps them apart, kills at
commit boundaries, concurrent delta-rs commits; and the access keys never show in output, logs, commit
metadata, Spark's plans or the web page."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from mvengine.api import Project
from mvengine.config import load_config
from mvengine.project.catalog import load_catalog
from mvengine.runtime import lock
from mvengine.runtime.crash_points import COMMITS
from mvengine.runtime.refresh import Refresher
from tests.conftest import write_project
from tests.spark.test_refresh_differential import SOURCES, apply_commit, check_snapshot, check_view
from tests.system.test_readme import DOCS, assert_printed, commands, run_readme
from tests.system.test_refresh_crash import BOUNDARY_VIEWS

pytestmark = pytest.mark.object_store

REPO = Path(__file__).resolve().parent.parent.parent
MV = str(Path(sys.executable).parent / "mv")


def readme_project(root: Path, store) -> tuple[Path, list]:
    """The example project (views/) with the object-store configuration of the docs (guides/object-store-and-
    cluster.md), pointed at `store`; and the page's console commands."""
    section = (DOCS / "guides" / "object-store-and-cluster.md").read_text(encoding="utf-8")
    conf = re.search(r"^```toml\n(.*?)^```", section, flags=re.DOTALL | re.MULTILINE).group(1)
    endpoint = re.search(r'AWS_ENDPOINT_URL = "(.*?)"', conf).group(1)
    bucket = re.search(r'warehouse = "s3://(.*?)/', conf).group(1)
    store.bucket(bucket)
    shutil.copytree(REPO / "views", root / "views")
    (root / "conf").mkdir(parents=True)
    # Spark's own INFO logging on, so the grep for the keys below covers what Spark logs.
    (root / "conf" / "mvengine.toml").write_text(
        conf.replace(endpoint, store.endpoint) + '\n[spark]\nlog_level = "INFO"\n'
    )
    return root, commands(section, "console object-store")


def mv(project: Path, *args: str, check: bool = True, timeout: int = 300) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [MV, "--project", str(project), *args], capture_output=True, text=True, timeout=timeout
    )
    if check:
        assert done.returncode == 0, f"mv {' '.join(args)}: {done.stdout[-2000:]}{done.stderr[-3000:]}"
    return done


def test_the_object_store_guide_with_every_table_on_an_object_store(
    spark, object_store, tmp_path: Path, monkeypatch, capfd
):
    monkeypatch.delenv("CI", raising=False)  # as a user's terminal has it
    project, found = readme_project(tmp_path / "p", object_store)
    assert len(found) >= 8
    keys = {"AWS_ACCESS_KEY_ID": object_store.KEY_ID, "AWS_SECRET_ACCESS_KEY": object_store.SECRET}
    for name, value in keys.items():  # what the guide's conf refers to, as the guide exports them
        monkeypatch.setenv(name, value)
    results = run_readme(project, capfd, found)
    assert_printed(results)
    said = [printed for _, printed in results]  # everything every command printed
    config = load_config(project)
    catalog = load_catalog(config)

    # Every view keeps the promise (DESIGN.md §1), read back from the object store by this process's Spark.
    for name in catalog.plans:
        check_view(spark, catalog, name, config.storage_options)

    # The keys: not in any output, any object of the bucket (commit metadata included), a Spark plan, the page.
    plans = io.StringIO()
    with contextlib.redirect_stdout(plans):
        Project(config, spark=spark).query("SELECT * FROM team_totals VERSION AS OF 1").explain(True)
        Project(config, spark=spark).query("SELECT * FROM user_scores").explain("formatted")
    said.append(plans.getvalue())
    said.extend(_ui_pages(project, ["/", "/api/graph", "/api/status", "/api/view/team_totals"]))
    objects = object_store.objects(config.warehouse.rsplit("/", 1)[0])
    assert any("_delta_log" in k for k in objects)
    for key in keys.values():
        assert not [k for k, body in objects.items() if key.encode() in body]
        assert not [s for s in said if key in s], f"{key} was printed"


def _ui_pages(project: Path, paths: list[str]) -> list[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [MV, "--project", str(project), "ui", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        pages = []
        for path in paths:
            deadline = time.monotonic() + 60
            while True:
                try:
                    pages.append(
                        urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30).read().decode()
                    )
                    break
                except OSError:
                    assert server.poll() is None and time.monotonic() < deadline, server.stdout.read()
                    time.sleep(0.3)
        assert "team_totals" in pages[1]
        return pages
    finally:
        server.terminate()
        pages_log = server.communicate(timeout=30)[0]
        pages.append(pages_log)


def test_a_second_refresh_is_refused_while_one_runs_and_waits_with_wait(spark, object_store, tmp_path: Path):
    bucket = object_store.bucket()
    project = write_project(tmp_path / "p", SOURCES, BOUNDARY_VIEWS, object_store.conf(f"{bucket}/wh"))
    config = load_config(project)
    Refresher(spark, config, load_catalog(config)).refresh()  # bootstrapped here, not by a child's own Spark
    running = subprocess.Popen(  # its next batch an hour away: the row added below waits for the waiting one
        [MV, "--project", str(project), "refresh", "--continuous", "--interval", "1h"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        folder = f"{bucket}/wh/_pipeline"
        deadline = time.monotonic() + 120
        while lock.lock_holder(folder, object_store.options) is None:
            assert running.poll() is None and time.monotonic() < deadline, running.stdout.read()
            time.sleep(0.3)
        # --full: else the second refresh may find every view up to date, and stop before taking the lock.
        refused = mv(project, "refresh", "--full", check=False)
        assert refused.returncode != 0
        assert (
            f"being refreshed by process {running.pid}" in refused.stderr
            and "Traceback" not in refused.stderr
        )
        status = json.loads(mv(project, "status", "--json").stdout)
        assert any("being refreshed" in (v["problem"] or "") for v in status), status
        _add_row(f"{bucket}/wh/sources/b", object_store.options)  # work for the waiting one, on the driver
        waiting = subprocess.Popen(
            [MV, "--project", str(project), "refresh", "--wait"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        said = waiting.stdout.readline()  # blocks until it reached the lease: its first line
        assert said.startswith("waiting for the lock: views "), said + waiting.stderr.read()
        time.sleep(2)
        assert waiting.poll() is None  # still waiting for the lease
        running.send_signal(signal.SIGINT)
        assert running.wait(timeout=120) == 0
        out, err = waiting.communicate(timeout=300)
        assert waiting.returncode == 0, out + err
    finally:
        with contextlib.suppress(ProcessLookupError):
            running.kill()
    # A refresh killed while it holds the lease leaves it behind: on the same host, the next one sees that its
    # holder is gone and takes it over at once.
    killed = subprocess.Popen(
        [MV, "--project", str(project), "refresh", "--continuous"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while lock.lock_holder(folder, object_store.options) is None:
        assert killed.poll() is None and time.monotonic() < deadline
        time.sleep(0.3)
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait()
    _add_row(f"{bucket}/wh/sources/b", object_store.options)
    assert "[stream]" in mv(project, "refresh", timeout=50).stdout  # at once: well within the lease's minute
    # A view taken out of views/ leaves its tables on the store, and the next refresh says so.
    (project / "views" / "views.sql").write_text(BOUNDARY_VIEWS.split("CREATE MATERIALIZED VIEW v_bag")[0])
    assert (
        "warning: v_bag has tables in the warehouse but is no longer in views/"
        in mv(project, "refresh").stdout
    )


def _add_row(uri: str, options: dict[str, str]) -> None:
    write_deltalake(
        uri,
        pa.table({"g": pa.array(["a"]), "v": pa.array([1], pa.int32())}),
        mode="append",
        storage_options=options,
    )


def test_a_lease_runs_out_and_its_holder_learns_it_was_taken_over(object_store, monkeypatch):
    monkeypatch.setattr(lock, "LEASE_S", 1.0)
    monkeypatch.setattr(lock, "RENEW_S", 30.0)  # the first holder stalls: it does not renew in time
    uri = f"{object_store.bucket()}/wh/_pipeline/lock"
    first, second = lock.Lease(uri, object_store.options), lock.Lease(uri, object_store.options)
    lost: list[str] = []
    with first.held(["v"], False, print, lost.append):
        assert second.holder()["owner"] == first.owner
        assert not second._acquire(["w"])  # held and live
        time.sleep(1.5)
        assert second._acquire(["w"])  # run out: taken over
        assert not first._commit({"owner": first.owner}, only_if_mine=True)  # the first one's renewal fails
    assert second.holder()["owner"] == second.owner  # the first one's release did not free the second's lease


def test_concurrent_commits_to_one_table_on_the_object_store_all_land(object_store):
    uri = f"{object_store.bucket()}/t"
    writer = (
        "import sys, pyarrow as pa, deltalake\n"
        "for i in range(15):\n"
        "    deltalake.write_deltalake(sys.argv[1], pa.table({'w': [int(sys.argv[2])], 'i': [i]}),\n"
        "                              storage_options=__import__('json').loads(sys.argv[3]), mode='append')\n"
    )
    write_deltalake(
        uri,
        pa.table({"w": pa.array([], pa.int64()), "i": pa.array([], pa.int64())}),
        storage_options=object_store.options,
    )
    writers = [
        subprocess.Popen([sys.executable, "-c", writer, uri, str(w), json.dumps(object_store.options)])
        for w in range(3)
    ]
    assert [w.wait(timeout=300) for w in writers] == [0, 0, 0]
    dt = DeltaTable(uri, storage_options=object_store.options)
    assert dt.version() == 45 and dt.to_pyarrow_table().num_rows == 45  # no commit lost or overwritten


def test_views_on_an_object_store_survive_sigkill_at_commit_boundaries(spark, object_store, tmp_path: Path):
    bucket = object_store.bucket()
    project = write_project(tmp_path / "p", SOURCES, BOUNDARY_VIEWS, object_store.conf(f"{bucket}/wh"))
    config = load_config(project)
    catalog = load_catalog(config)
    options = config.storage_options
    Refresher(spark, config, catalog).refresh()
    order = [p.name for p in catalog.views_to_refresh(None)]
    # One kill at each kind of commit, before or after it by turns, each in another view (every boundary of
    # every kind: tests/system/test_refresh_crash.py).
    points = [
        f"{order[i % len(order)]}:{commit}:{('before', 'after')[i % 2]}" for i, commit in enumerate(COMMITS)
    ]
    for i, point in enumerate(points):
        apply_commit(spark, catalog, ("upsert_t", [(i % 9, f"g{i}", i % 5)]), options)
        apply_commit(spark, catalog, ("insert_b", [("a", i)]), options)
        child = subprocess.run(
            [MV, "--project", str(project), "refresh"],
            env=dict(os.environ, MVENGINE_CRASH_AT=point),
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        assert child.returncode == -signal.SIGKILL, (
            f"kill {i} at {point} never came: {child.stdout}{child.stderr}"
        )
        Refresher(spark, config, catalog).refresh()  # finishes the killed batch, exactly
        for name in order:
            check_snapshot(spark, catalog, name, options)
    for name in order:
        check_view(spark, catalog, name, options)


def test_a_missing_bucket_or_an_unreachable_store_is_a_clear_error(object_store, tmp_path: Path):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    cases = [
        (object_store.conf("s3://no-such-bucket/wh"), "NoSuchBucket: The specified bucket does not exist"),
        (
            object_store.conf(f"{object_store.bucket()}/wh").replace(object_store.endpoint, closed),
            "Connection refused (os error 111)",
        ),
    ]
    for i, (conf, reason) in enumerate(cases):
        project = write_project(tmp_path / str(i), SOURCES, BOUNDARY_VIEWS, conf)
        done = mv(project, "refresh", check=False)
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert f"{reason}\n  hint: check [storage.options]" in done.stderr, done.stderr
