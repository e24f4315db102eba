"""One refresh at a time per warehouse: `<warehouse>/_pipeline/lock`.

The views of a warehouse share one pipeline (one cut record, one streaming query's checkpoint), and two
processes moving them at once would race each other's commits. A refresh holds the lock for as long as it runs
and records who it is (process, host, start time, views) for the error a second refresh prints and for
`mv status`.

- On a local or mounted path: an exclusive `flock` on the lock file. The kernel drops it when its process ends,
  however it ends: a lock left by a killed refresh is taken over by the next one without any clean-up.
- On an object store, which has no locks: a lease, kept as the commits of a small Delta table (no data files).
  Each acquisition, renewal and release is one commit made from the version its maker read, without retries,
  so of two processes that read the same version only one commits: the same conditional write that keeps
  every table's commits safe (delta-rs's S3 commits are PUT If-None-Match). The holder renews the lease every
  RENEW_S seconds; a lease not renewed for LEASE_S seconds (its process killed, or cut off), or held by a
  process of this host that is gone, is taken over. A holder whose lease was taken over stops after the
  batch under way (`lost`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from mvengine.config import join_uri
from mvengine.errors import MvError
from mvengine.storage.objects import STORE_HINT, is_local, store_error

LOCK_FILE = "lock"
LEASE_S = 60.0  # a lease not renewed for this long is free
RENEW_S = 10.0
RECORD_KEY = "mvengine.lock"  # the commit metadata that holds a lease's record


@contextlib.contextmanager
def refresh_lock(
    folder: str,
    views: list[str],
    *,
    storage_options: dict[str, str] | None = None,
    wait: bool = False,
    waiting: Callable[[str], None] = lambda line: None,
    lost: Callable[[str], None] = lambda reason: None,
) -> Iterator[None]:
    """Hold the warehouse's refresh lock (in `folder`, the pipeline's folder) for the block. Taken by another
    process: raise an MvError saying who holds it, or with `wait`, say so through `waiting` and wait for it.
    `lost` is told when a lease on an object store was taken over while held (see the module's text)."""
    if is_local(folder):
        with _file_lock(os.path.join(folder, LOCK_FILE), views, wait, waiting):
            yield
    else:
        with Lease(join_uri(folder, LOCK_FILE), storage_options or {}).held(views, wait, waiting, lost):
            yield


def lock_holder(folder: str, storage_options: dict[str, str] | None = None) -> dict[str, Any] | None:
    """Who holds the refresh lock, read without taking it: the holder's record, when that refresh still runs (a
    killed refresh leaves its record, and the kernel has dropped its lock, or its lease runs out)."""
    if not is_local(folder):
        return Lease(join_uri(folder, LOCK_FILE), storage_options or {}).holder()
    try:
        with open(os.path.join(folder, LOCK_FILE), encoding="utf-8") as f:
            holder = json.loads(f.read() or "null")
    except (OSError, ValueError):
        return None
    if not isinstance(holder, dict) or "pid" not in holder:
        return None
    return holder if _alive(holder) else None


@contextlib.contextmanager
def _file_lock(path: str, views: list[str], wait: bool, waiting: Callable[[str], None]) -> Iterator[None]:
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise MvError(
            f"cannot write in the warehouse: {path}: {e.strerror}",
            hint="mv refresh writes the views' tables under [project] warehouse: make that folder "
            "writable, or set warehouse to one that is",
        ) from None
    try:
        if not _try_lock(fd):
            holder = _holder(path)
            if not wait:
                raise _taken(holder, f"lock file {path}")
            waiting(f"waiting for the lock: views {holder}")
            while not _try_lock(fd):
                time.sleep(0.2)
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(_record(views)).encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


class Lease:
    """The refresh lock on an object store: a lease kept in the commits of the Delta table at `uri`."""

    def __init__(self, uri: str, storage_options: dict[str, str]) -> None:
        from mvengine.storage.tables import TableRef

        self.ref = TableRef(uri, storage_options, "refresh lock")
        self.owner = uuid.uuid4().hex

    def holder(self) -> dict[str, Any] | None:
        """The record of the live lease, if one is held."""
        record = self._latest()[1]
        return record if record is not None and self._live(record) else None

    @contextlib.contextmanager
    def held(
        self, views: list[str], wait: bool, waiting: Callable[[str], None], lost: Callable[[str], None]
    ) -> Iterator[None]:
        said = False
        while not self._acquire(views):
            holder = self.holder()
            if holder is None:
                time.sleep(0.2)  # released, or run out, between the two reads (or another took it): again
                continue
            if not wait:
                raise _taken(_describe(holder), f"lease {self.ref.uri}")
            if not said:
                waiting(f"waiting for the lock: views {_describe(holder)}")
                said = True
            time.sleep(1.0)
        stop = threading.Event()
        renewer = threading.Thread(
            target=self._renew, args=(views, stop, lost), name="mvengine-lease", daemon=True
        )
        renewer.start()
        try:
            yield
        finally:
            stop.set()
            renewer.join()
            with contextlib.suppress(MvError):  # the store out of reach: the lease runs out by itself
                self._commit({**_record(views), "owner": self.owner, "released": True}, only_if_mine=True)

    def _acquire(self, views: list[str]) -> bool:
        version, record = self._latest()
        if record is not None and self._live(record) and record.get("owner") != self.owner:
            return False
        return self._commit_at(version, {**_record(views), "owner": self.owner})

    def _renew(self, views: list[str], stop: threading.Event, lost: Callable[[str], None]) -> None:
        """Renew every RENEW_S seconds until `stop`; tell `lost` when another process took the lease over, or
        when the store could not be reached for as long as a lease lasts (another may take it over then)."""
        since = _record(views)["since"]
        renewed = time.monotonic()
        while not stop.wait(RENEW_S):
            try:
                if not self._commit(
                    {**_record(views), "since": since, "owner": self.owner}, only_if_mine=True
                ):
                    holder = self.holder()
                    lost(
                        "the refresh lock was taken over"
                        + (f": views {_describe(holder)}" if holder else "")
                        + f" (lease {self.ref.uri}, not renewed for {LEASE_S:.0f} s)"
                    )
                    return
                renewed = time.monotonic()
            except MvError as e:
                if time.monotonic() - renewed > LEASE_S:
                    lost(f"the refresh lock could not be renewed for {LEASE_S:.0f} s: {e}")
                    return

    def _commit(self, record: dict[str, Any], *, only_if_mine: bool) -> bool:
        """Commit `record` after the latest version if this process holds the lease there; False if not."""
        for _ in range(5):
            version, latest = self._latest()
            if only_if_mine and (
                latest is None or latest.get("owner") != self.owner or latest.get("released")
            ):
                return False
            if self._commit_at(version, record):
                return True
        return False

    def _commit_at(self, version: int | None, record: dict[str, Any]) -> bool:
        """One commit of `record` as version `version + 1` (the table's first when None); False when another
        process made that version first."""
        import pyarrow as pa
        from deltalake import CommitProperties, DeltaTable
        from deltalake.exceptions import CommitFailedError

        record = {**record, "expires": int((time.time() + LEASE_S) * 1000)}
        metadata = CommitProperties(custom_metadata={RECORD_KEY: json.dumps(record)}, max_commit_retries=0)
        try:
            if version is None:
                DeltaTable.create(
                    self.ref.uri,
                    pa.schema([("lease", pa.string())]),
                    mode="error",
                    storage_options=self.ref.storage_options or None,
                    commit_properties=metadata,
                    configuration={
                        "delta.logRetentionDuration": "interval 1 hour",
                        "delta.enableExpiredLogCleanup": "true",
                        "delta.checkpointInterval": "50",
                    },
                )
            else:
                dt = DeltaTable(
                    self.ref.uri, storage_options=self.ref.storage_options or None, version=version
                )
                dt.create_write_transaction([], "append", dt.schema(), commit_properties=metadata)
        except CommitFailedError:  # another process made that version first (no retries were allowed)
            return False
        except Exception as e:  # noqa: BLE001
            if version is None and "already exists" in str(e):  # another process created the table first
                return False
            raise MvError(
                f"cannot take the refresh lock at {self.ref.uri}: {self.ref.redact(store_error(str(e)))}",
                hint=STORE_HINT,
            ) from None
        return True

    def _latest(self) -> tuple[int | None, dict[str, Any] | None]:
        """The table's latest version and the lease record it holds (None, None when there is no table)."""
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        try:
            dt = DeltaTable(self.ref.uri, storage_options=self.ref.storage_options or None)
            entry = dt.history(1)[0]
        except TableNotFoundError:
            return None, None
        except Exception as e:  # noqa: BLE001 - the store out of reach, or refusing the keys
            raise MvError(
                f"cannot read the refresh lock at {self.ref.uri}: {self.ref.redact(store_error(str(e)))}",
                hint=STORE_HINT,
            ) from None
        try:
            record = json.loads(entry.get(RECORD_KEY) or "null")
        except ValueError:
            record = None
        return dt.version(), record if isinstance(record, dict) else None

    def _live(self, record: dict[str, Any]) -> bool:
        return (
            not record.get("released")
            and int(record.get("expires", 0)) > time.time() * 1000
            and _alive(record)
        )


def _record(views: list[str]) -> dict[str, Any]:
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "views": views,
        "since": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
    }


def _alive(holder: dict[str, Any]) -> bool:
    """False when the holder was a process of this host that is gone."""
    if holder.get("host") != socket.gethostname():
        return True
    try:
        os.kill(int(holder["pid"]), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, another user's
    return True


def _taken(holder: str, where: str) -> MvError:
    return MvError(
        f"views {holder} ({where})",
        hint="wait for that refresh to end, stop it (Ctrl-C, or kill the process), or run "
        "mv refresh --wait to start as soon as it ends",
    )


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _holder(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            owner = json.loads(f.read() or "{}")
    except (OSError, ValueError):
        owner = {}
    return _describe(owner)


def _describe(owner: dict[str, Any]) -> str:
    """Who holds the lock, as the error says it ("... are being refreshed by process N on HOST since T")."""
    views = ", ".join(owner.get("views") or []) or "of this warehouse"
    if "pid" not in owner:
        return f"{views} are being refreshed by another process"
    return (
        f"{views} are being refreshed by process {owner['pid']} on {owner.get('host', '?')} "
        f"since {owner.get('since', '?')}"
    )
