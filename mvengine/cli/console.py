"""All output of the CLI goes through here (errors in red on a terminal)."""

from __future__ import annotations

import sys


class Console:
    def out(self, text: str) -> None:
        print(text, flush=True)

    def error(self, error: object) -> None:
        text = f"Error: {error}"
        if sys.stderr.isatty():
            text = f"\033[31m{text}\033[0m"
        print(text, file=sys.stderr, flush=True)

    def table(self, header: list[str], rows: list[list[str]]) -> None:
        widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
        for row in [header, *rows]:
            self.out("  ".join(str(x).ljust(w) for x, w in zip(row, widths)).rstrip())
