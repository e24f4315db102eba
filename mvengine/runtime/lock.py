"""One refresh at a time per warehouse: `<warehouse>/_pipeline/lock`.

The views of a warehouse share one pipeline (one cut record, one streaming query's checkpoint), and two
processes moving them at once would race each other's commits. A refresh holds an exclusive `flock` on the lock
file for as long as it runs, and writes who it is into the file (process, host, start time, views) for the
error a second refresh prints. The kernel drops the lock when its process ends, however it ends: a lock left by
a killed refresh is taken over by the next one without any clean-up. (A warehouse on an object store gets a
lock of its own with issue 21; the pipeline's files are local until then: runtime/pipeline_files.pipeline_folder.)
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

from mvengine.errors import MvError

LOCK_FILE = "lock"


@contextlib.contextmanager
def refresh_lock(folder: str, views: list[str], *, wait: bool = False,
                 waiting: Callable[[str], None] = lambda line: None) -> Iterator[None]:
    """Hold the warehouse's refresh lock (in `folder`, the pipeline's folder) for the block. Taken by another
    process: raise an MvError saying who holds it, or with `wait`, say so through `waiting` and wait for it."""
    path = os.path.join(folder, LOCK_FILE)
    try:
        os.makedirs(folder, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise MvError(f"cannot write in the warehouse: {path}: {e.strerror}",
                      hint="mv refresh writes the views' tables under [project] warehouse: make that folder "
                           "writable, or set warehouse to one that is") from None
    try:
        if not _try_lock(fd):
            holder = _holder(path)
            if not wait:
                raise MvError(f"views {holder} (lock file {path})",
                              hint="wait for that refresh to end, stop it (Ctrl-C, or kill the process), or run "
                                   "mv refresh --wait to start as soon as it ends")
            waiting(f"waiting for the lock: views {holder}")
            while not _try_lock(fd):
                time.sleep(0.2)
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({
            "pid": os.getpid(), "host": socket.gethostname(), "views": views,
            "since": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        }).encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _holder(path: str) -> str:
    """Who holds the lock, as the error says it ("... are being refreshed by process N on HOST since T")."""
    try:
        with open(path, encoding="utf-8") as f:
            owner = json.loads(f.read() or "{}")
    except (OSError, ValueError):
        owner = {}
    views = ", ".join(owner.get("views") or []) or "of this warehouse"
    if "pid" not in owner:
        return f"{views} are being refreshed by another process"
    return (f"{views} are being refreshed by process {owner['pid']} on {owner.get('host', '?')} "
            f"since {owner.get('since', '?')}")
