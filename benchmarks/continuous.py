"""What the `--continuous` benchmarks share: `mv refresh --continuous` in a child process, and when a view first
reflects a source version (from the Delta logs, as `mv describe` reports `source_versions`)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from mvengine.errors import MvError
from mvengine.reading.versions import Versions


@contextlib.contextmanager
def refreshing(root: Path, log: str | None) -> Iterator[None]:
    """`mv refresh --continuous --interval 0.1s` over the project while the block runs (with `log`, its output,
    with the phases of every batch, is written there), stopped by SIGTERM after."""
    mv = Path(sys.executable).parent / "mv"
    command = [str(mv), "--project", str(root), "refresh", "--continuous", "--interval", "0.1s"]
    out = open(log, "w") if log else subprocess.DEVNULL  # noqa: SIM115 (open while the child runs)
    child = subprocess.Popen(
        command + (["--profile"] if log else []),
        stdout=out,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        yield
    finally:
        os.killpg(child.pid, signal.SIGTERM)
        child.wait(timeout=60)


def reflected_at(
    config, catalog, view: str, source: str, version: int, timeout: float, poll_s: float = 0.05
) -> int:
    """The commit time (ms) of the first version of `view` that reflects `version` of `source` (through the
    views it reads), waiting for it at most `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        versions = Versions(config, catalog)  # fresh: it caches the logs it read
        try:
            commits = versions.snapshot_commits(view)
        except MvError:  # not bootstrapped yet
            commits = {}
        for v in sorted(commits):
            if min(versions.source_versions(view, v).get(source, [-1])) >= version:
                return commits[v].timestamp_ms
        time.sleep(poll_s)
    raise SystemExit(f"{view} did not reflect {source}@{version} within {timeout} s")
