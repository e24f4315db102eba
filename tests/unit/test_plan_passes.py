"""Each rewrite pass of a bound plan (plan/rewrites/passes.py) against its golden fixture, the way sqlglot pairs each
optimizer rule with a fixture file: tests/plans/passes/<pass>.sql holds views over the corpus's sources, and
<pass>.txt each view's operator tree before and after that pass (the passes before it applied first).

Regenerate after an intended change with `pytest tests/unit/test_plan_passes.py --update-golden`, and review the
diff."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mvengine.config import load_config
from mvengine.plan.binder import Binder
from mvengine.plan.rewrites.passes import PASSES
from mvengine.project.catalog import load_catalog, source_relation
from mvengine.reading.explain import tree_lines

PLANS = Path(__file__).parent.parent / "plans"


def test_every_pass_has_its_fixture():
    names = sorted(p.__name__ for p in PASSES)
    assert sorted(f.stem for f in (PLANS / "passes").glob("*.sql")) == names


@pytest.mark.parametrize("position", range(len(PASSES)), ids=[p.__name__ for p in PASSES])
def test_pass_matches_its_fixture(position: int, tmp_path: Path, request) -> None:
    rewrite = PASSES[position]
    root = tmp_path / "project"
    (root / "views").mkdir(parents=True)
    shutil.copy(PLANS / "sources.sql", root / "views" / "_sources.sql")
    shutil.copy(PLANS / "passes" / f"{rewrite.__name__}.sql", root / "views" / "views.sql")
    catalog = load_catalog(load_config(root))
    relations = {name.lower(): source_relation(source) for name, source in catalog.sources.items()}
    shown: list[str] = []
    for name, plan in catalog.plans.items():
        binder = Binder(
            lambda n: relations.get(n.lower()), list(catalog.graph.nodes), "views.sql", f"view {name}"
        )
        node = binder.query(plan.view.query)
        for earlier in PASSES[:position]:
            node = earlier(node)
        after = rewrite(node)
        shown += [f"== {name}", "before:", *tree_lines(node, 1), "after:", *tree_lines(after, 1), ""]
    text = "\n".join(shown)
    expected = PLANS / "passes" / f"{rewrite.__name__}.txt"
    if request.config.getoption("--update-golden"):
        expected.write_text(text)
    assert expected.exists(), (
        f"no fixture for the pass {rewrite.__name__}: run pytest --update-golden and review it"
    )
    assert text == expected.read_text()
