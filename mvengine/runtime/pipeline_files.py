"""The pipeline's own files, under `<warehouse>/_pipeline`: the cut record of the batch under way, the streaming
query's checkpoint and the refresh lock (runtime/lock.py). Kept apart from pipeline.py so that readers
(`mv status`, `mv ui`) get them without importing the pipeline's Spark machinery."""

from __future__ import annotations

import json
import os

from mvengine.errors import MvError
from mvengine.project.config import join_uri

CUT_FILE = "cut.json"  # beside the query's checkpoint, under <warehouse>/_pipeline/


class CutRecord:
    """The cut of the pipeline batch under way, in a small JSON file: written before the batch moves any view,
    marked done after the last (one per warehouse, so that the next refresh finishes it whichever views it
    names), or marked failed by a view that failed before writing anything (nothing to finish: the next
    refresh plans its batch anew)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def pending(self) -> dict[str, int] | None:
        """The cut of a batch that began and never finished, if any, and not failed before a view wrote."""
        record = self._read()
        if record is None or record.get("done") or record.get("failed"):
            return None
        return {n: int(v) for n, v in record["cut"].items()}

    def failure(self) -> tuple[str, str] | None:
        """The view the last batch failed in (before it wrote anything) and the error's first line; None when
        the last batch did not fail so."""
        record = self._read()
        if record is None or record.get("done") or not record.get("failed"):
            return None
        return record["failed"], (record.get("error") or "").split("\n")[0]

    def begin(self, cut: dict[str, int]) -> None:
        self._write({"cut": cut, "done": False})

    def fail(self, cut: dict[str, int], view: str, error: str = "") -> None:
        self._write({"cut": cut, "done": False, "failed": view, "error": error})

    def done(self, cut: dict[str, int]) -> None:
        self._write({"cut": cut, "done": True})

    def _read(self) -> dict | None:
        try:
            with open(self.path, encoding="utf-8") as f:
                return json.load(f)
        except (FileNotFoundError, ValueError):
            return None

    def _write(self, record: dict) -> None:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        temporary = f"{self.path}.{os.getpid()}"
        with open(temporary, "w", encoding="utf-8") as f:
            json.dump(record, f, sort_keys=True)
        os.replace(temporary, self.path)  # whole or not at all


def pipeline_checkpoint(warehouse: str) -> str:
    """The query's checkpoint: one per warehouse (the query of `--continuous` picks up where the last one
    stopped, whichever views it covers)."""
    return os.path.join(pipeline_folder(warehouse), "query")


def pipeline_folder(warehouse: str) -> str:
    """`<warehouse>/_pipeline`: the cut record, the query's checkpoint and the refresh lock (runtime/lock.py)."""
    folder = join_uri(warehouse, "_pipeline").removeprefix("file:")
    if "://" in folder:
        raise MvError(f"the pipeline's files must be on a local or mounted path, not {folder}",
                      hint="set [project] warehouse to a local path")
    return folder
