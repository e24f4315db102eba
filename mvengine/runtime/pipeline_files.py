"""The pipeline's own files, under `<warehouse>/_pipeline`: the cut record of the batch under way, the streaming
query's checkpoint and the refresh lock (runtime/lock.py), on a local path or on the object store of the
warehouse. Kept apart from pipeline.py so that readers (`mv status`, `mv ui`) get them without importing the
pipeline's Spark machinery."""

from __future__ import annotations

import json

from mvengine.config import join_uri
from mvengine.storage.objects import is_local, local_path, read_text, write_text

CUT_FILE = "cut.json"  # beside the query's checkpoint, under <warehouse>/_pipeline/


class CutRecord:
    """The cut of the pipeline batch under way, in a small JSON file: written before the batch moves any view,
    marked done after the last (one per warehouse, so that the next refresh finishes it whichever views it
    names), or marked failed by a view that failed before writing anything (nothing to finish: the next
    refresh plans its batch anew)."""

    def __init__(self, folder: str, storage_options: dict[str, str]) -> None:
        self.path = join_uri(folder, CUT_FILE)
        self.storage_options = storage_options

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

    def fail(self, cut: dict[str, int], view: str | None, error: str = "") -> None:
        self._write({"cut": cut, "done": False, "failed": view, "error": error})

    def done(self, cut: dict[str, int]) -> None:
        self._write({"cut": cut, "done": True})

    def _read(self) -> dict | None:
        try:
            return json.loads(read_text(self.path, self.storage_options) or "null")
        except ValueError:
            return None

    def _write(self, record: dict) -> None:
        write_text(self.path, json.dumps(record, sort_keys=True), self.storage_options)  # whole or not at all


def pipeline_checkpoint(warehouse: str) -> str | None:
    """The query's checkpoint: one per warehouse (the query of `--continuous` picks up where the last one
    stopped, whichever views it covers). None for a warehouse on an object store: Spark writes checkpoints
    through Hadoop's filesystems only, and its S3 connector is a 650 MB download; there the query keeps its
    checkpoint in a temporary local folder for as long as it runs, and a new query starts from the versions
    the views' snapshot commits record (`mvengine.inputs`), which is where a view's progress lives anyway."""
    folder = pipeline_folder(warehouse)
    return local_path(join_uri(folder, "query")) if is_local(folder) else None


def pipeline_folder(warehouse: str) -> str:
    """`<warehouse>/_pipeline`: the cut record, the query's checkpoint and the refresh lock (runtime/lock.py)."""
    folder = join_uri(warehouse, "_pipeline")
    return local_path(folder) if is_local(folder) else folder
