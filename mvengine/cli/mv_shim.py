"""The `mv` command: mvengine's CLI, except that calls meant for the system's file-move command go there.

`mv` also names the POSIX move command, and an activated virtual environment puts this script first on
PATH. So any call whose first word is not one of mvengine's commands or options is handed, unchanged, to
the next `mv` on PATH (e.g. /bin/mv): `mv a.txt b.txt` still moves a file.
"""

from __future__ import annotations

import difflib
import os
import shutil
import sys

from mvengine.cli.main import COMMANDS, leave
from mvengine.cli.main import main as mvengine_main

OWN_OPTIONS = ("--project", "--debug", "--help", "-h", "--version")


def is_mvengine_call(args: list[str]) -> bool:
    if not args:
        return True
    first = args[0]
    return first in COMMANDS or first in OWN_OPTIONS or first.startswith("--project=")


def system_mv() -> str | None:
    """The first `mv` on PATH that is not this script."""
    me = os.path.realpath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        candidate = shutil.which("mv", path=folder)
        if candidate and os.path.realpath(candidate) != me and not _is_python_script(candidate):
            return candidate
    for fallback in ("/bin/mv", "/usr/bin/mv"):
        if os.path.exists(fallback):
            return fallback
    return None


def _is_python_script(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return b"python" in f.readline()
    except OSError:
        return False


def near_miss(args: list[str]) -> str | None:
    """The command a mistyped first word was meant to be (`mv refesh`), when it names no file to move."""
    first = args[0]
    if first.startswith("-") or os.path.lexists(first):
        return None
    close = difflib.get_close_matches(first.lower(), COMMANDS, n=1, cutoff=0.75)
    return close[0] if close else None


def main() -> int:
    args = sys.argv[1:]
    if is_mvengine_call(args):
        leave(mvengine_main(args, prog="mv"))
    meant = near_miss(args)
    if meant is not None:
        print(
            f"Error: unknown command {args[0]!r}\n  hint: did you mean mv {meant}? (mv --help lists the commands)",
            file=sys.stderr,
        )
        return 2
    target = system_mv()
    if target is None:
        print("Error: no system mv command found on PATH to move files with", file=sys.stderr)
        return 127
    os.execv(target, [target, *args])
    return 127  # not reached: execv replaces the process
