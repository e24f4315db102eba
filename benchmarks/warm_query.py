"""What a `mv query` costs with and without a running pipeline to serve it a Spark (runtime/connect.py).

A copy of the example project (views/, conf/) is refreshed once; then `mv query` runs --repeat times as a user
runs it (a new process each time) with no other mv process (each query starts its own Spark), and --repeat times
while `mv refresh --continuous` runs on the same warehouse (each query takes its Spark over Spark Connect).
Prints the median wall seconds of each, side by side, and their ratio.

    python benchmarks/warm_query.py --repeat 5
"""

from __future__ import annotations

import argparse
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MV = Path(sys.executable).parent / "mv"
QUERY = "SELECT team, total FROM team_totals VERSION AS OF 0 ORDER BY team"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        project = Path(folder)
        for part in ("views", "conf"):
            shutil.copytree(ROOT / part, project / part)
        _mv(project, "refresh")
        cold = [_timed_query(project, expect_served=False) for _ in range(args.repeat)]
        serving = subprocess.Popen(
            [str(MV), "--project", str(project), "refresh", "--continuous"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            assert serving.stdout is not None
            for line in serving.stdout:
                if line.startswith("serving this Spark"):
                    break
            time.sleep(2)  # (its first batch)
            warm = [_timed_query(project, expect_served=True) for _ in range(args.repeat)]
        finally:
            serving.send_signal(signal.SIGTERM)
            serving.wait(timeout=120)
    cold_s, warm_s = statistics.median(cold), statistics.median(warm)
    print(f"mv query, median of {args.repeat} (wall seconds, one process each):")
    print(
        f"  starting its own Spark          {cold_s:6.2f} s   (runs: {', '.join(f'{s:.2f}' for s in cold)})"
    )
    print(
        f"  through a running pipeline's    {warm_s:6.2f} s   (runs: {', '.join(f'{s:.2f}' for s in warm)})"
    )
    print(f"  ratio                           {cold_s / warm_s:6.1f}x")


def _mv(project: Path, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([str(MV), "--project", str(project), *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"mv {' '.join(args)} failed: {done.stderr}")
    return done


def _timed_query(project: Path, *, expect_served: bool) -> float:
    started = time.monotonic()
    done = _mv(project, "query", QUERY)
    seconds = time.monotonic() - started
    served = "by the Spark of mv process" in done.stdout
    if served != expect_served:
        raise SystemExit(f"expected the query {'' if expect_served else 'not '}to be served: {done.stdout}")
    return seconds


if __name__ == "__main__":
    main()
