"""`mv ui` in a real browser: headless Chromium driven by Playwright against `mv ui` serving a real project.

The page is checked by what it says (node names, versions, states, plot points, changelog rows), never by
pixels. The screenshot it takes goes to MV_UI_SCREENSHOT when set (docs/ui.png, on the docs' "Watching the
pipeline" page, is made so)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from mvengine import Project
from tests.conftest import write_project
from tests.system.test_cli import BIN

SOURCES = """
CREATE TABLE scores (team STRING, score INT) WITH ('append_only' = 'true');
"""
VIEWS = """
CREATE MATERIALIZED VIEW totals AS SELECT team, SUM(score) AS total, COUNT(*) AS n FROM scores GROUP BY team;
CREATE MATERIALIZED VIEW big_teams AS SELECT team, total FROM totals WHERE total > 10;
"""
# A name longer than its box, and an edge that skips a layer (scores, layer 0, to a view of layer 2).
LONG = """
CREATE MATERIALIZED VIEW teams_with_scores_and_their_totals_side_by_side AS
SELECT s.team, s.score, t.total FROM scores AS s JOIN big_teams AS t ON s.team = t.team;
"""


def chromium() -> str | None:
    """The browser: MV_CHROMIUM, the system's Chromium (Debian's `chromium`, installed by `make setup`), or
    Playwright's own download."""
    for candidate in (
        os.environ.get("MV_CHROMIUM"),
        shutil.which("chromium"),
        shutil.which("chromium-browser"),
    ):
        if candidate:
            return candidate
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        path = p.chromium.executable_path
    return path if os.path.exists(path) else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def append(project: Project, rows: list[tuple[str, int]]) -> None:
    write_deltalake(
        project.catalog.sources["scores"].path,
        pa.table(
            {
                "team": pa.array([r[0] for r in rows], pa.string()),
                "score": pa.array([r[1] for r in rows], pa.int32()),
            }
        ),
        mode="append",
    )


@pytest.fixture
def served(tmp_path, spark):
    root = write_project(tmp_path / "project", SOURCES, VIEWS + LONG)
    project = Project.open(root, spark=spark)
    project.refresh()
    append(project, [("red", 5), ("blue", 20)])
    project.refresh()
    port = free_port()
    server = subprocess.Popen(
        [str(BIN / "mv"), "--project", str(root), "ui", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        line = server.stdout.readline()
        assert line.startswith(f"mv ui: http://127.0.0.1:{port}/"), line + server.stdout.read()
        yield project, f"http://127.0.0.1:{port}/"
    finally:
        server.send_signal(signal.SIGINT)  # Ctrl-C, its documented stop (issue 35, item 13: it was an error)
        said = server.communicate(timeout=30)[0]
    assert server.returncode == 0 and "mv ui stopped" in said and "Error" not in said, said


def _scrape(url: str) -> str:
    """The page at `url`, once the server listens (it prints its address just before)."""
    for _ in range(100):
        try:
            with urllib.request.urlopen(url, timeout=30) as response:
                return response.read().decode()
        except urllib.error.URLError:
            time.sleep(0.1)
    raise AssertionError(f"nothing answers at {url}")


def test_the_page_shows_the_dag_and_follows_a_refresh_without_a_reload(served, tmp_path):
    project, url = served
    # Its Prometheus metrics, read from the warehouse's logs at the scrape (ui/metrics.py).
    scraped = _scrape(url + "metrics")
    assert 'mvengine_view_batches_total{view="totals"} 2.0' in scraped, scraped
    assert 'mvengine_source_version{source="scores"}' in scraped and "mvengine_view_failing" in scraped
    browser_path = chromium()
    if browser_path is None:
        pytest.skip(
            "no Chromium: install Debian's chromium (make setup does) or run playwright install chromium"
        )
    from playwright.sync_api import expect, sync_playwright

    project, url = served
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_path, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(url)
        totals = page.locator('.node[data-name="totals"]')
        expect(totals).to_have_attribute("data-version", "1")
        names = page.locator(".node").evaluate_all("nodes => nodes.map(n => n.dataset.name)")
        assert sorted(names) == [
            "big_teams",
            "scores",
            "teams_with_scores_and_their_totals_side_by_side",
            "totals",
        ]
        assert page.locator(".edge").count() == 4
        # issue 35, item 13: every name fits its box, and no edge runs behind a box it does not join
        assert page.evaluate(FITS) == [], "names wider than their boxes"
        assert page.evaluate(CROSSINGS) == [], "edges behind another view's box"
        expect(totals).to_have_attribute("data-state", "fresh")
        expect(page.locator('.node[data-name="big_teams"]')).to_have_attribute("data-state", "fresh")
        expect(totals.locator(".lag")).to_have_text("lag 0s")
        page.evaluate("window.sameDocument = true")  # gone if the page reloads

        append(project, [("red", 30)])  # a source commit: both views fall behind, and their lag grows
        expect(totals).to_have_attribute("data-state", "stale")
        expect(totals.locator(".lag")).to_contain_text(", 1 behind")
        assert float(totals.get_attribute("data-lag")) > 0
        project.refresh()
        expect(totals).to_have_attribute("data-version", "2")
        expect(totals).to_have_attribute("data-state", "fresh")
        expect(page.locator('.node[data-name="big_teams"]')).to_have_attribute("data-version", "2")
        assert page.evaluate("window.sameDocument") is True

        totals.click()
        panel = page.locator("#panel")
        expect(panel).to_have_attribute("data-view", "totals")
        expect(page.locator("#plot-ms circle.point")).to_have_count(3)  # versions 0, 1 and 2
        versions = page.locator("#plot-ms circle.point").evaluate_all("c => c.map(p => p.dataset.version)")
        assert versions == ["0", "1", "2"]
        expect(page.locator('#plot-rows circle.point[data-series="rows in"]')).to_have_count(
            2
        )  # 0 recomputed
        expect(page.locator("#changelog tbody tr")).not_to_have_count(0)
        assert "+U" in page.locator("#changelog").inner_text()  # red's total went from 5 to 35
        expect(page.locator("#plan")).to_contain_text("strategy   incremental")
        page.screenshot(path=os.environ.get("MV_UI_SCREENSHOT") or str(tmp_path / "ui.png"), full_page=True)
        browser.close()


# Names whose drawn text is wider than the box around it.
FITS = """() => [...document.querySelectorAll('.node')].filter(n =>
  n.querySelector('text.name').getBBox().width > n.querySelector('rect').getBBox().width - 8
).map(n => n.dataset.name)"""
# (edge, box) pairs where a point along the edge falls inside a box that is neither of its ends.
CROSSINGS = """() => {
  const boxes = [...document.querySelectorAll('.node')].map(n => {
    const r = n.getBoundingClientRect(); return {name: n.dataset.name, r};
  });
  const svg = document.getElementById('dag'), found = [];
  for (const e of document.querySelectorAll('.edge')) {
    const m = e.getScreenCTM(), length = e.getTotalLength();
    for (let d = 0; d <= length; d += 4) {
      const p = e.getPointAtLength(d), x = m.a * p.x + m.e, y = m.d * p.y + m.f;
      for (const b of boxes) {
        if (b.name === e.dataset.from || b.name === e.dataset.to) continue;
        if (x > b.r.left + 1 && x < b.r.right - 1 && y > b.r.top + 1 && y < b.r.bottom - 1)
          found.push(`${e.dataset.from}->${e.dataset.to} behind ${b.name}`);
      }
    }
  }
  return [...new Set(found)];
}"""


def test_ui_refuses_a_port_in_use(tmp_path):
    root = write_project(tmp_path / "project", SOURCES, VIEWS)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [str(BIN / "mv"), "--project", str(root), "ui", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 1 and f"cannot listen on 127.0.0.1:{port}" in done.stderr
    assert "--port" in done.stderr and "Traceback" not in done.stderr
    assert not Path(root / "warehouse").exists()  # it never writes
