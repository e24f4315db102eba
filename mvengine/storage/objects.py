"""Small files beside the tables (the pipeline's cut record) and folder listings and removals, on a local path
or on an object store: one interface, fed with the same delta-rs object-store options as the tables."""

from __future__ import annotations

import os
import re
import shutil
import uuid

import pyarrow as pa
import pyarrow.fs as pafs

from mvengine.config import redact_text
from mvengine.errors import StorageError

STORE_HINT = (
    "check [storage.options] (AWS_ENDPOINT_URL, AWS_REGION, the access keys) and that the bucket exists"
)


def is_local(uri: str) -> bool:
    """Whether `uri` is a local or mounted path (else an object-store URI such as s3://bucket/x)."""
    return "://" not in uri.removeprefix("file:")


def local_path(uri: str) -> str:
    return uri.removeprefix("file://").removeprefix("file:")


def read_text(uri: str, storage_options: dict[str, str]) -> str | None:
    """The text of the file at `uri`; None when there is none."""
    if is_local(uri):
        try:
            with open(local_path(uri), encoding="utf-8") as f:
                return f.read()
        except FileNotFoundError:
            return None
    fs, path = _filesystem(uri, storage_options)
    try:
        with fs.open_input_stream(path) as f:
            return f.read().decode("utf-8")
    except FileNotFoundError:
        return None
    except OSError as e:
        if "not found" in str(e).lower():
            return None
        raise _failed("read", uri, e, storage_options) from None


def write_text(uri: str, text: str, storage_options: dict[str, str]) -> None:
    """Write the file whole or not at all: a temporary file renamed over it locally; on an object store, one
    PUT (an object is replaced whole)."""
    if is_local(uri):
        path = local_path(uri)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        temporary = f"{path}.{uuid.uuid4().hex[:8]}"
        with open(temporary, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(temporary, path)
        return
    fs, path = _filesystem(uri, storage_options)
    try:
        # Through Arrow's buffered stream: delta-rs's stream takes the bytes Arrow's C++ side writes, not the
        # Buffer objects of a write from Python.
        with pa.BufferedOutputStream(fs.open_output_stream(path), buffer_size=1 << 16) as f:
            f.write(text.encode("utf-8"))
    except OSError as e:
        raise _failed("write", uri, e, storage_options) from None


def list_folders(uri: str, storage_options: dict[str, str]) -> list[str]:
    """The names of the folders right under `uri`, sorted (none when it does not exist)."""
    if is_local(uri):
        path = local_path(uri)
        return (
            sorted(n for n in os.listdir(path) if os.path.isdir(os.path.join(path, n)))
            if os.path.isdir(path)
            else []
        )
    fs, path = _filesystem(uri, storage_options)
    try:
        infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True, recursive=True))
    except OSError as e:
        raise _failed("list", uri, e, storage_options) from None
    # Object stores have no folders, only keys: a folder is the first segment of a longer key.
    prefix = f"{path}/" if path else ""
    return sorted(
        {i.path.removeprefix(prefix).split("/")[0] for i in infos if "/" in i.path.removeprefix(prefix)}
    )


def remove_tree(uri: str, storage_options: dict[str, str]) -> None:
    """Delete the folder `uri` and all under it (nothing when it does not exist)."""
    if is_local(uri):
        shutil.rmtree(local_path(uri), ignore_errors=True)
        return
    fs, path = _filesystem(uri, storage_options)
    try:
        fs.delete_dir(path)  # every key under the prefix (delta-rs's handler takes no missing_dir_ok)
    except OSError as e:
        raise _failed("remove", uri, e, storage_options) from None


def remove_staging(uri: str, storage_options: dict[str, str]) -> None:
    """Delete a write's staging folder (`<table>/_mvengine_staging/<id>`), and the staging root with it once no
    other write stages there (on a local disk: on an object store a folder goes with its last key)."""
    remove_tree(uri, storage_options)
    if is_local(uri):
        try:
            os.rmdir(os.path.dirname(local_path(uri).rstrip("/")))
        except OSError:  # another write's staging folder is in it (or it is gone)
            pass


def _filesystem(uri: str, storage_options: dict[str, str]) -> tuple[pafs.FileSystem, str]:
    """delta-rs's object store as a pyarrow filesystem rooted at the bucket (or container), and the path of
    `uri` in it."""
    from deltalake.fs import DeltaStorageHandler

    scheme, rest = uri.split("://", 1)
    bucket, _, path = rest.partition("/")
    handler = DeltaStorageHandler(f"{scheme}://{bucket}", storage_options or None)
    return pafs.PyFileSystem(handler), path.strip("/")


def _failed(what: str, uri: str, error: Exception, storage_options: dict[str, str]) -> StorageError:
    return StorageError(
        f"cannot {what} {uri}: {redact_text(store_error(str(error)), storage_options)}", hint=STORE_HINT
    )


def store_error(message: str) -> str:
    """What an object store's error says, out of delta-rs's chain of causes ("Generic S3 error" first): the
    store's own code and message when it answered, else the innermost cause (connection refused, ...)."""
    answer = re.search(r"<Code>(.*?)</Code>\s*<Message>(.*?)</Message>", message, re.DOTALL)
    if answer:
        return f"{answer.group(1)}: {answer.group(2)}"
    plain = re.sub(r"\x1b\[[0-9;]*m", "", message)  # delta-rs colours its arrows
    causes = [re.sub(r"^[^A-Za-z]*", "", line).strip() for line in plain.splitlines()]
    causes = [c for c in causes if c]
    return causes[-1] if causes else message
