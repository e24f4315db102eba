"""Queries without a Spark start: a long-running mv process (`mv refresh --continuous`, `mv ui`) serves its warm
Spark over Spark Connect on loopback, and `mv query` and `mv changes` use it while it runs.

The server is Spark's own (`SparkConnectService`, in the pyspark distribution's jars), started inside the JVM the
process already has, bound to 127.0.0.1 on a port the system picks, and behind a random token
(`spark.connect.authenticate.token`). Its address and token are written to `_pipeline/connect.json` in the
warehouse, readable by the warehouse's owner only, and removed when the process stops. A reader that finds the
file, the process alive and the server answering takes a Spark Connect session; otherwise it starts its own
Spark, as before. Local warehouses only: the endpoint is this machine's.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mvengine.config import Config
from mvengine.runtime.pipeline_files import pipeline_folder
from mvengine.storage.objects import is_local

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ENDPOINT_FILE = "connect.json"
_TOKEN = "spark.connect.authenticate.token"


def server_settings() -> dict[str, str]:
    """The Spark settings a session needs to serve queries later (read when the JVM starts): loopback, a port
    the system picks, and this process's own token."""
    return {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": "0",
        _TOKEN: secrets.token_urlsafe(24),
    }


@dataclass(frozen=True)
class Endpoint:
    url: str  # sc://localhost:PORT
    token: str
    pid: int  # the serving process

    def remote(self) -> str:
        return f"{self.url}/;token={self.token}"


def endpoint_path(config: Config) -> str | None:
    """Where the endpoint of the process serving the warehouse is written (None: not a local warehouse)."""
    folder = pipeline_folder(config.warehouse)
    return os.path.join(folder, ENDPOINT_FILE) if is_local(folder) else None


def serve(spark: SparkSession, config: Config) -> Endpoint | None:
    """Start Spark Connect in the session's JVM and write its endpoint for readers (None: not served, for an
    object-store warehouse, `[serve] queries = false`, or a session started without `server_settings`)."""
    path = endpoint_path(config)
    token = spark.sparkContext.getConf().get(_TOKEN, None)
    if path is None or not config.serve_queries or not token:
        return None
    jvm = spark._jvm
    assert jvm is not None
    service = getattr(getattr(jvm.org.apache.spark.sql.connect.service, "SparkConnectService$"), "MODULE$")
    service.start(spark.sparkContext._jsc.sc())
    endpoint = Endpoint(f"sc://localhost:{service.localPort()}", token, os.getpid())
    os.makedirs(os.path.dirname(path), exist_ok=True)
    partial = f"{path}.{os.getpid()}"
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as f:
        json.dump({"url": endpoint.url, "token": token, "pid": endpoint.pid, "since": time.time()}, f)
    os.replace(partial, path)
    return endpoint


def stop_serving(config: Config, endpoint: Endpoint | None) -> None:
    """Remove the endpoint file, when it is still this process's (Spark's server stops with the JVM)."""
    path = endpoint_path(config)
    if endpoint is None or path is None:
        return
    found = _read(path)
    if found is not None and found.pid == endpoint.pid:
        os.remove(path)


def warm_session(config: Config) -> tuple[SparkSession, int] | None:
    """A Spark Connect session to the Spark of the process serving the warehouse, and that process's id; None
    when none serves it (or its server does not answer: a stale file is removed). mvengine's data sources are
    not registered in it yet (session.register_data_sources)."""
    path = endpoint_path(config)
    if path is None or not config.serve_queries:
        return None
    endpoint = _read(path)
    if endpoint is None:
        return None
    if not _alive(endpoint.pid):
        _remove_stale(path, endpoint)
        return None
    if not _listening(endpoint):  # (Spark Connect's client would retry for minutes)
        return None
    try:
        from pyspark.sql import SparkSession

        session = SparkSession.builder.remote(endpoint.remote()).create()
        session.conf.get("spark.sql.session.timeZone")  # (a first call: it answers, and takes the token)
    except Exception:  # no Spark Connect client installed, or the server went away: start a Spark instead
        return None
    return session, endpoint.pid


def _read(path: str) -> Endpoint | None:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        return Endpoint(str(data["url"]), str(data["token"]), int(data["pid"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _listening(endpoint: Endpoint) -> bool:
    """Whether the server's port takes a connection, within a second."""
    port = int(endpoint.url.rsplit(":", 1)[1])
    try:
        with socket.create_connection(("localhost", port), timeout=1.0):
            return True
    except OSError:
        return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def _remove_stale(path: str, endpoint: Endpoint) -> None:
    """The file of a process that died without removing it (killed)."""
    found = _read(path)
    if found == endpoint:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
