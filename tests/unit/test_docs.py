"""The docs site cannot drift from the code: the generated reference pages equal what the code makes now, the
architecture page names every module, the JSON documents have exactly the fields the reference lists, and the
built site (mkdocs, --strict) has no link to a page or anchor that is not there.

Links to other sites are not followed (this machine reaches no network); every link inside the site, and to the
repository's files from the README, is."""

from __future__ import annotations

import importlib.util
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

from mvengine.cli.main import main
from mvengine.project.layout import COMMIT_METADATA, CommitRecord
from mvengine.reading.explain import PLAN_FIELDS
from mvengine.reading.status import STATUS_FIELDS

ROOT = Path(__file__).resolve().parent.parent.parent


def docs_reference():
    spec = importlib.util.spec_from_file_location("docs_reference", ROOT / "scripts" / "docs_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reference_pages_are_what_the_code_makes():
    for path, text in docs_reference().generated().items():
        assert path.exists(), f"{path} is missing: run make docs-reference"
        assert path.read_text(encoding="utf-8") == text, f"{path} is out of date: run make docs-reference"


def test_the_sql_reference_asks_the_planner_about_every_kind_of_answer():
    page = (ROOT / "docs" / "reference" / "sql.md").read_text(encoding="utf-8")
    rows = [line for line in page.splitlines() if line.startswith("| ") and " | `" in line]
    verdicts = {row.split(" | ")[2] for row in rows if len(row.split(" | ")) > 3}
    assert {"incremental", "full", "refused"} <= verdicts, verdicts
    assert len(rows) >= 40


def test_the_architecture_page_names_every_module():
    page = (ROOT / "docs" / "internals" / "architecture.md").read_text(encoding="utf-8")
    modules = sorted(
        str(p.relative_to(ROOT / "mvengine"))
        for p in (ROOT / "mvengine").rglob("*.py")
        if p.name != "__init__.py"
    )
    missing = [m for m in modules if f"`{m}`" not in page]
    assert not missing, f"docs/internals/architecture.md does not name: {', '.join(missing)}"
    named = set(re.findall(r"^\| `([\w/]+\.py)` \|", page, flags=re.MULTILINE))
    assert not named - set(modules), f"the page names modules that are gone: {sorted(named - set(modules))}"


def test_a_snapshot_commit_records_exactly_the_documented_keys():
    record = CommitRecord(
        batch_id=3,
        generation=1,
        sql_hash="h",
        kind="stream",
        inputs={"a": 2},
        changes=4,
        input_ids={"a": "id"},
        watermark=5,
        expectations=[{"name": "e"}],
        rows_in=6,
        batch_ms=7,
        engine="driver",
        clock=8,
        expired=9,
    )
    assert set(record.metadata()) == {f"mvengine.{k}" for k in COMMIT_METADATA}


def fields_of(document: dict, prefix: str = "") -> set[str]:
    """The field names of a JSON document as the reference writes them: `views[].name` for a list's entries."""
    names = set()
    for key, value in document.items():
        names.add(prefix + key)
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value) and prefix == "":
            names.discard(prefix + key)
            for entry in value:
                names |= fields_of(entry, f"{key}[].")
    return names


def test_mv_plan_and_mv_status_print_exactly_the_documented_fields(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)  # the example project, which neither command writes to
    assert main(["plan", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert fields_of(plan) == set(PLAN_FIELDS)
    assert main(["status", "--json"]) == 0
    entries = json.loads(capsys.readouterr().out)
    assert entries and all(set(e) == set(STATUS_FIELDS) for e in entries)


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        values = dict(attrs)
        if values.get("id"):
            self.ids.add(values["id"])
        for name in ("href", "src"):
            if values.get(name) and tag in ("a", "img", "link", "script"):
                self.links.append(values[name])


def test_the_site_builds_strict_and_has_no_broken_link(tmp_path):
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    site = tmp_path / "site"
    config = load_config(str(ROOT / "mkdocs.yml"), site_dir=str(site), strict=True)
    build(config)  # strict: any warning (a missing page or anchor, a file outside the nav) aborts
    pages = {p: _parsed(p) for p in site.rglob("*.html")}
    broken = []
    for page, parsed in pages.items():
        for link in parsed.links:
            url = urlparse(link)
            if url.scheme or link.startswith(("//", "mailto:")):
                continue  # another site
            path = unquote(url.path)
            base = site if path.startswith("/") else page.parent  # 404.html links from the site's root
            target = (base / path.lstrip("/")).resolve() if path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{page.relative_to(site)}: {link}")
            elif url.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else _parsed(target).ids
                if url.fragment not in ids:
                    broken.append(f"{page.relative_to(site)}: {link} (no such anchor)")
    assert len(pages) >= 30
    assert not broken, "\n".join(broken)


def _parsed(page: Path) -> _Links:
    parser = _Links()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


def test_the_readme_is_short_and_its_links_lead_to_files():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    for link in re.findall(r"\]\(([^)]+)\)", text):
        if "://" not in link:
            assert (ROOT / link.split("#")[0]).exists(), f"README.md links to {link}, which is not there"
