"""moto's S3 server, one request at a time: `python tests/s3_server.py HOST PORT`.

moto checks a conditional PUT (`If-None-Match: *`, `If-Match`) and then stores the object in two steps, so two
threads of its server can both pass the check and the second object overwrites the first. Real S3 makes the
check and the write one step, and Delta's commits and mvengine's lease rely on that: under moto's threaded
server, three writers committing 45 times lost one commit now and then. Serving one request at a time gives
moto's conditional PUT the atomicity of S3's.
"""

import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import run_simple


class OneRequestAtATime:
    """WSGI middleware: the app handles a request, its response body included, under one lock."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        with self.lock:
            return list(self.app(environ, start_response))


if __name__ == "__main__":
    host, port = sys.argv[1], int(sys.argv[2])
    run_simple(
        host,
        port,
        OneRequestAtATime(DomainDispatcherApplication(create_backend_app)),
        threaded=True,  # connections are still served side by side; their requests take turns
        request_handler=MotoRequestHandler,
    )
