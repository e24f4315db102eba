"""`mvengine-worker-python`: the interpreter Spark starts for its Python workers, with the project's pyspark
imported from site-packages rather than from the zip Spark puts first on every worker's path.

A pip-installed pyspark ships a zipped copy of itself (and of py4j, and spark-core's jar) that Spark prepends
to each worker's PYTHONPATH. Python caches no compiled code for modules imported from a zip, so every Python
process Spark starts afresh — the runner of each Structured Streaming query over a Python data source, one per
view per refresh — compiles pyspark from source first: without this launcher, such a query took 1.24 s to
start, with it 0.59 s (`benchmarks/stream_start.py`). The zip is the same files as the installed package, so dropping it
from the path changes what runs in no way but its start-up time. Entries outside the installed pyspark stay.
"""

from __future__ import annotations

import os
import sys
import sysconfig


def main() -> None:
    bundled = os.path.join(sysconfig.get_paths()["purelib"], "pyspark") + os.sep
    entries = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    os.environ["PYTHONPATH"] = os.pathsep.join(e for e in entries if e and not e.startswith(bundled))
    os.execv(sys.executable, [sys.executable, *sys.argv[1:]])
