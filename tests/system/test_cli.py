"""The `mv` and `mvengine` commands, run as a user runs them (real processes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent


def run(*args: str, cwd: Path | None = None, tool: str = "mv") -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.run(
        [str(BIN / tool), *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=120
    )


def example(tmp_path: Path) -> Path:
    (tmp_path / "views").mkdir()
    (tmp_path / "views" / "s.sql").write_text(
        "CREATE TABLE users (name STRING NOT NULL, team STRING, PRIMARY KEY (name) NOT ENFORCED);\n"
    )
    return tmp_path


def test_mv_moves_files_when_the_call_is_not_for_mvengine(tmp_path):
    (tmp_path / "a.txt").write_text("hello")
    result = run("a.txt", "b.txt", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "a.txt").exists() and (tmp_path / "b.txt").read_text() == "hello"
    result = run("-f", "b.txt", "sources", cwd=tmp_path)  # an option of the system mv, then a file name
    assert result.returncode == 0 and (tmp_path / "sources").read_text() == "hello"


def test_help_explains_both_commands():
    for tool in ("mv", "mvengine"):
        result = run("--help", tool=tool)
        assert result.returncode == 0
        assert "--project DIR" in result.stdout and "system's file-move command" in result.stdout


def test_sources_lists_and_creates_tables(tmp_path):
    root = example(tmp_path)
    listed = run("--project", str(root), "sources")
    assert listed.returncode == 0, listed.stderr
    assert "users" in listed.stdout and "missing" in listed.stdout and "mv sources --create" in listed.stdout
    created = run("--project", str(root), "sources", "--create")
    assert created.returncode == 0, created.stderr
    assert "created at v0" in created.stdout
    doc = json.loads(run("sources", "--json", cwd=root, tool="mvengine").stdout)
    (users,) = doc["sources"]
    assert users["exists"] and users["version"] == 0 and users["key"] == ["name"]
    assert users["path"] == str(root.resolve() / "warehouse" / "sources" / "users")


def test_a_user_mistake_is_one_error_line_without_traceback(tmp_path):
    root = example(tmp_path)
    (root / "views" / "bad.sql").write_text("CREATE TABLE broken (a INT, PRIMARY KEY (b) NOT ENFORCED);\n")
    result = run("--project", str(root), "sources", "--create")
    assert result.returncode == 1
    assert (
        result.stderr.startswith("Error: ")
        and "bad.sql:1: source broken: PRIMARY KEY names unknown column" in result.stderr
    )
    assert "Traceback" not in result.stderr
    assert not (root / "warehouse").exists()  # nothing was written


def test_existing_source_without_cdf_is_reported_with_the_fix(tmp_path):
    import pyarrow as pa
    from deltalake import write_deltalake

    root = example(tmp_path)
    write_deltalake(
        str(root / "warehouse" / "sources" / "users"),
        pa.table({"name": pa.array(["a"]), "team": pa.array(["x"])}),
    )
    result = run("--project", str(root), "sources", "--create")
    assert result.returncode == 1
    assert "does not have the change data feed enabled" in result.stderr and "hint:" in result.stderr


def test_the_mv_shim_knows_every_word_of_the_parser():
    """The shim decides by its own word list; it must not drift from the parser's commands and options."""
    from mvengine.cli.main import COMMANDS, build_parser
    from mvengine.cli.mv_shim import OWN_OPTIONS

    parser = build_parser("mv")
    (subparsers,) = [a for a in parser._actions if a.choices and a.dest == "command"]
    assert set(subparsers.choices) == set(COMMANDS)
    assert set(parser._option_string_actions) == set(OWN_OPTIONS)


def test_issue_35_item_13_a_near_miss_of_a_command_is_named_not_handed_to_the_system_mv(tmp_path):
    """`mv refesh` is not a file to move (no such file): the command meant is suggested, exit 2; a real file
    still moves."""
    result = subprocess.run(
        [str(BIN / "mv"), "refesh"], capture_output=True, text=True, cwd=tmp_path, timeout=60, check=False
    )
    assert result.returncode == 2, result.stderr
    assert "unknown command 'refesh'" in result.stderr and "did you mean mv refresh?" in result.stderr
    assert "missing destination" not in result.stderr
    (tmp_path / "refesh").write_text("a file of that name")
    moved = subprocess.run(
        [str(BIN / "mv"), "refesh", "moved"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert moved.returncode == 0 and (tmp_path / "moved").exists(), moved.stderr
