"""The README and the docs cannot rot: every command in their ```console blocks runs, in order, against a copy of
the example project (views/, conf/), and prints what the page says it prints. The pages run in one project, one
after the other: the README first, then the docs pages in the order of the site's nav (mkdocs.yml), so a page
may go on from the state the pages before it left (the guides read the views the quickstart built). A page that
includes the README's quickstart (`--8<-- "README.md:quickstart"`) does not run it twice: the raw Markdown holds
the include line, not the blocks.

A block's `$ ` lines are commands (a quoted argument may continue on the next lines); the lines after a command
are its output. A command ending in `&` runs in the background. A command whose output shows `^C` runs until the
background commands have finished and every view reflects every source commit, then gets Ctrl-C (SIGINT); the
lines after `^C` are what it prints as it stops. Outputs are compared line by line with every number masked
(times, versions and totals vary from run to run) and runs of spaces collapsed: each line the page shows must be
among the lines the command printed; a batch line may name more expectations than it shows (how a background
command's commits fall into batches depends on the machine's load). `...` stands for lines left out, and
`/path/to/mvengine` for the project's folder.

The Python API example (the ```python block of docs/guides/reading.md's "Python API") runs last, in the same
project.

Foreground commands run in this process (`mvengine.cli.main.main`, on the run's Spark session, their output
captured at the file descriptors): a Spark start per command would be most of the test's time. The commands
run in the background, the one stopped with Ctrl-C and the Python example run as real processes, as a user
runs them; tests/system/test_cli*.py check the `mv` executable itself (the shim, exit codes, signals).

The set-up commands (`make run`, `make test`) and the Nexmark example's minute-long run, in ```bash blocks, are
not run here: CI runs `make test` itself, the project starts as `make run` leaves it (refreshed first, in-process),
and tests/spark/test_nexmark.py refreshes the Nexmark views over the same event stream. The blocks of the
object-store guide (```console object-store) run in tests/system/test_object_store.py, against a local S3.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from mvengine.config import load_config
from mvengine.project.catalog import load_catalog
from mvengine.runtime.refresh import Refresher
from tests.system.test_cli import BIN

ROOT = Path(__file__).resolve().parent.parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PYTHON_API = DOCS / "guides" / "reading.md"
TIMEOUT_S = 600
CLONE = "/path/to/mvengine"  # how the README writes the folder of the user's clone


@dataclass
class Command:
    line: str
    expected: list[str] = field(default_factory=list)

    @property
    def background(self) -> bool:
        return self.line.rstrip().endswith("&")

    @property
    def interrupted(self) -> bool:
        return "^C" in self.expected


def documents() -> list[Path]:
    """The README, then every page of the docs site in the order of its nav."""
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]
    return [README, *(DOCS / page for page in _pages(nav))]


def _pages(nav) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, dict):
        return [p for value in nav.values() for p in _pages(value)]
    return [p for item in nav for p in _pages(item)]


def all_commands() -> list[Command]:
    """Every console command of the README and the docs, in the order they run."""
    return [c for page in documents() for c in commands(page.read_text(encoding="utf-8"))]


def commands(text: str, fence: str = "console") -> list[Command]:
    """A page's console commands with the output it shows for each, in order: those of the blocks opened by
    ```console (the example project on a local disk), or by another `fence` (```console object-store)."""
    found: list[Command] = []
    for block in re.findall(rf"^```{fence}\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE):
        lines = block.splitlines()
        i = 0
        while i < len(lines):
            if not lines[i].startswith("$ "):
                found[-1].expected.append(lines[i])
                i += 1
                continue
            command = lines[i][2:]
            while not _complete(command):
                i += 1
                command += "\n" + lines[i]
            found.append(Command(command))
            i += 1
    return found


def _complete(command: str) -> bool:
    try:
        shlex.split(command)
    except ValueError:  # an open quote: the command goes on on the next line
        return False
    return True


def mask(line: str) -> str:
    """Numbers as `#`, and a time's fraction of a second dropped: a time prints it only when there is one (a
    commit at a whole second prints none)."""
    return " ".join(re.sub(r"\d+", "#", re.sub(r"(:\d\d)\.\d+", r"\1", line)).split())


def run_readme(
    project: Path, capfd: pytest.CaptureFixture[str], found: list[Command] | None = None
) -> list[tuple[Command, str]]:
    """Run every command of the README and the docs (or those `found`) in `project`; returns each with what it
    printed."""
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    env.pop("CI", None)
    background: list[subprocess.Popen] = []
    results = []
    try:
        for command in found if found is not None else all_commands():
            if command.background:
                background.append(
                    subprocess.Popen(
                        command.line.rstrip().removesuffix("&"),
                        shell=True,
                        cwd=project,
                        env=env,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                )
                continue
            if command.interrupted:
                results.append((command, _until_fresh(command.line, project, env, background)))
                continue
            code, printed = _in_process(command.line, project, capfd)
            assert code == 0, f"$ {command.line}\n{printed}"
            results.append((command, printed.replace(str(project), CLONE)))
    finally:
        for process in background:
            process.kill()
            process.wait()
    return results


def _in_process(line: str, project: Path, capfd: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """`mv ...` run by the CLI's main() in `project` (the README's commands redirect nothing): exit code, output."""
    from mvengine.cli.main import main

    argv = shlex.split(line)
    assert argv[0] == "mv" and not {">", "|", "&&", ";"} & set(argv), line
    capfd.readouterr()
    with contextlib.chdir(project):
        code = main(argv[1:], prog="mv")
    out, err = capfd.readouterr()
    return code, out + err


def _until_fresh(line: str, project: Path, env: dict, background: list[subprocess.Popen]) -> str:
    """Run a long-running command until the background commands are done and every view reflects every source
    commit, then press Ctrl-C (SIGINT to its process group, as a terminal does)."""
    out = project / ".readme_out"
    with out.open("w") as sink:
        process = subprocess.Popen(
            [str(BIN / "mv"), *shlex.split(line)[1:]],
            cwd=project,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline and process.poll() is None:
            time.sleep(1)
            if all(p.poll() is not None for p in background) and _all_fresh(project):
                break
        os.killpg(process.pid, signal.SIGINT)
        code = process.wait(timeout=300)
    text = out.read_text().replace(str(project), CLONE)
    assert code == 0, f"$ {line}\nexit {code}\n{text}"
    return text


def _all_fresh(project: Path) -> bool:
    from mvengine import Project

    readme_project = Project.open(project)
    views = [
        v.get("stale_since", "never") for v in map(readme_project.describe, readme_project.catalog.plans)
    ]
    return all(stale is None for stale in views)


def test_console_blocks_of_the_readme_and_the_docs_are_well_formed():
    assert len(commands(README.read_text(encoding="utf-8"))) >= 5
    found = all_commands()
    assert len(found) >= 20
    assert all(c.line.startswith("mv ") for c in found), [
        c.line for c in found if not c.line.startswith("mv ")
    ]


@pytest.mark.readme
def test_every_command_of_the_readme_and_the_docs_prints_what_they_show(spark, tmp_path, capfd, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    project = tmp_path / "example"
    project.mkdir()
    for folder in ("views", "conf", "examples/nexmark/views", "examples/nexmark/conf", "examples/quickstart"):
        shutil.copytree(ROOT / folder, project / folder)
    config = load_config(project)  # as `make run` leaves it: every view refreshed (here, in this process)
    Refresher(spark, config, load_catalog(config)).refresh()
    assert_printed(run_readme(project, capfd))
    # The Python API example, in this process (its Project takes this process's session, as a notebook's would).
    example = compile(python_example(PYTHON_API.read_text(encoding="utf-8")), str(PYTHON_API), "exec")
    capfd.readouterr()
    with contextlib.chdir(project):
        exec(example, {"__name__": "readme_example"})
    shown = capfd.readouterr().out
    assert " team|total|" in shown, shown  # its DataFrames' show()


def assert_printed(results: list[tuple[Command, str]]) -> None:
    """Each command printed every line the README shows for it (numbers masked)."""
    for command, printed in results:
        have = [_batch_line(line) for line in printed.splitlines()]
        missing = [
            line
            for line in command.expected
            if line.strip() not in ("", "^C", "...") and not _among(_batch_line(line), have)
        ]
        assert not missing, (
            f"$ {command.line}\nREADME shows, but it did not print:\n"
            + "\n".join(missing)
            + "\nit printed:\n"
            + printed
        )


def _batch_line(line: str) -> tuple[str, frozenset[str]]:
    """A line masked, its `(expectations: ...)` clauses apart: a batch line's findings are a set."""
    head, _, findings = mask(line).partition(" (expectations: ")
    return head, frozenset(findings.removesuffix(")").split(", ")) if findings else frozenset()


def _among(expected: tuple[str, frozenset[str]], have: list[tuple[str, frozenset[str]]]) -> bool:
    """A line the README shows is among those printed; a batch line may report more findings than it shows:
    with the demo running beside `mv refresh --continuous`, how the demo's commits fall into batches depends
    on the machine's load (a slow Spark start takes them all in one), and a batch reports all its commits'."""
    head, findings = expected
    return any(head == h and findings <= f for h, f in have)


def python_example(text: str) -> str:
    """The Python API example (the ```python block of its section)."""
    section = text[text.index("## Python API") :]
    return re.search(r"^```python\n(.*?)^```", section, flags=re.DOTALL | re.MULTILINE).group(1)
