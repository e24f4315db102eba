"""Golden files: `mv plan --json` of every case in tests/plans/cases, against tests/plans/expected.

A case is one .sql file (views over the shared tests/plans/sources.sql) or a folder laid out as a project
(views/, optionally conf/). Cases named e* must fail: their expected file holds the error output.
Regenerate after an intended change with `pytest tests/unit/test_plan_golden.py --update-golden`, and review the diff.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mvengine.cli.main import main

PLANS = Path(__file__).parent.parent / "plans"
CASES = sorted(p for p in (PLANS / "cases").iterdir() if p.suffix == ".sql" or p.is_dir())


def case_project(case: Path, root: Path) -> Path:
    (root / "views").mkdir(parents=True)
    shutil.copy(PLANS / "sources.sql", root / "views" / "_sources.sql")
    if case.is_dir():
        shutil.copytree(case, root, dirs_exist_ok=True)
    else:
        shutil.copy(case, root / "views" / case.name)
    return root


def run_plan(case: Path, root: Path, capsys) -> str:
    project = case_project(case, root)
    code = main(["--project", str(project), "plan", "--json"])
    out, err = capsys.readouterr()
    if case.name.startswith("e"):
        assert code == 1, f"{case.name} should fail, but printed:\n{out}"
        assert out == "" and "Traceback" not in err
        return err.replace(str(project), "<project>")
    assert code == 0, err
    document = json.loads(out)
    return json.dumps(document, indent=2).replace(str(project), "<project>") + "\n"


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_plan_matches_golden_file(case: Path, tmp_path: Path, capsys, request) -> None:
    actual = run_plan(case, tmp_path / "project", capsys)
    expected_file = PLANS / "expected" / (case.stem + (".txt" if case.name.startswith("e") else ".json"))
    if request.config.getoption("--update-golden"):
        expected_file.parent.mkdir(exist_ok=True)
        expected_file.write_text(actual, encoding="utf-8")
    assert expected_file.exists(), f"no golden file for {case.name}: run pytest --update-golden and review it"
    assert actual == expected_file.read_text(encoding="utf-8")


def test_corpus_is_large_enough() -> None:
    assert len([c for c in CASES if not c.name.startswith("e")]) >= 40
