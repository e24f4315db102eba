"""Java regular expressions (java.util.regex, which Spark's regexp_extract, RLIKE and split read) in the subset
that RE2, Arrow's regex engine, matches exactly as Java does, rewritten in RE2's syntax.

The subset: literal characters, punctuation escaped by a backslash, `\\t \\n \\r \\f`, `.`, `^` and `$`,
character classes of characters and ranges (negated or not), `\\d \\w \\s` and their negations, groups
(capturing and `(?:...)`), alternation, and the greedy and lazy quantifiers `* + ? {n} {n,} {n,m}`. On these
both engines search leftmost-first and report the submatches a backtracking search finds. They still differ on
line terminators: Java's `.` leaves out `\\r`, `\\u0085`, `\\u2028` and `\\u2029` besides `\\n`, and its `$`
also matches before a final one, so the caller checks the input for LINE_TERMINATOR. Java's `\\s` holds the
vertical tab and RE2's does not: the classes are written out. Everything else (backreferences, lookaround,
possessive quantifiers, inline flags, `\\b`, `\\p{...}`, class unions and intersections, octal and Unicode
escapes) is outside the subset: `translate` gives None and Spark evaluates the expression.

No pyarrow here: `driver_support` asks, from a plan alone, whether a pattern is in the subset.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

# The characters Java ends a line at (what `.` and `$` treat apart), as an RE2 class.
LINE_TERMINATOR = "[\\n\\r\\x{85}\\x{2028}\\x{2029}]"

_CLASSES = {"d": "0-9", "w": "a-zA-Z_0-9", "s": " \\t\\n\\x0B\\f\\r"}  # as Java defines them
_CONTROLS = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_PUNCTUATION = frozenset(string.punctuation) - {"_"}  # a backslash before these means the character itself
_META = frozenset("\\^$.|?*+()[]{}")
_MOST_REPEATS = 1000  # RE2 refuses counted repetitions beyond


@dataclass(frozen=True)
class Translated:
    pattern: str  # in RE2's syntax: the Java pattern's groups named g1, g2, ... and the whole match g0
    groups: int  # the capturing groups of the Java pattern
    literal: str | None  # the one string the pattern matches, when it is made of characters alone


def translate(pattern: str) -> Translated | None:
    """The Java regex `pattern` in RE2's syntax, or None when it is not in the subset."""
    return _Translator(pattern).run()


class _Translator:
    def __init__(self, pattern: str) -> None:
        self.text = pattern
        self.i = 0
        self.out: list[str] = []
        self.groups = 0
        self.literal: list[str] | None = []
        # whether the last item takes a quantifier, and whether it is a greedy quantifier (which `?` makes lazy)
        self.quantifiable = False
        self.quantified = False

    def run(self) -> Translated | None:
        depth = 0
        while self.i < len(self.text):
            c = self.text[self.i]
            if c == "(":
                if self.text.startswith("(?:", self.i):
                    self._item("(?:", quantifiable=False, width=3)
                elif self.text.startswith("(?", self.i):
                    return None
                else:
                    self.groups += 1
                    self._item(f"(?P<g{self.groups}>", quantifiable=False)
                depth += 1
            elif c == ")":
                depth -= 1
                if depth < 0:
                    return None
                self._item(")", quantifiable=True)
            elif c in "|^$":
                self._item(c, quantifiable=False)
            elif c == ".":
                self._item(".", quantifiable=True)
            elif c in "*+?{":
                if not self._quantifier():
                    return None
                continue
            elif c == "[":
                found = self._class()
                if found is None:
                    return None
                self.out.append(found)
                self.literal, self.quantifiable, self.quantified = None, True, False
            elif c == "\\":
                if not self._escape():
                    return None
                continue
            elif c in "]}":
                return None
            else:
                self._character(c)
                self.i += 1
        if depth != 0:
            return None
        literal = "".join(self.literal) if self.literal is not None else None
        return Translated(f"(?P<g0>{''.join(self.out)})", self.groups, literal)

    def _item(self, text: str, *, quantifiable: bool, width: int = 1) -> None:
        self.out.append(text)
        self.i += width
        self.literal, self.quantifiable, self.quantified = None, quantifiable, False

    def _character(self, c: str) -> None:
        self.out.append(_escaped(c))
        if self.literal is not None:
            self.literal.append(c)
        self.quantifiable, self.quantified = True, False

    def _escape(self) -> bool:
        if self.i + 1 == len(self.text):
            return False
        e = self.text[self.i + 1]
        self.i += 2
        if e.lower() in _CLASSES:
            negated = "^" if e.isupper() else ""
            self.out.append(f"[{negated}{_CLASSES[e.lower()]}]")
            self.literal, self.quantifiable, self.quantified = None, True, False
            return True
        c = _CONTROLS.get(e, e if e in _PUNCTUATION else None)
        if c is None:
            return False
        self._character(c)
        return True

    def _quantifier(self) -> bool:
        c = self.text[self.i]
        if c == "?" and self.quantified:  # lazy, once
            self.out.append("?")
            self.i += 1
            self.quantified = False
            return True
        if not self.quantifiable:
            return False
        if c == "{":
            end = self.text.find("}", self.i)
            counts = self.text[self.i + 1 : end].split(",") if end > 0 else []
            if (
                not 1 <= len(counts) <= 2
                or not counts[0].isdigit()
                or not all(n.isdigit() or (n == "" and k == 1) for k, n in enumerate(counts))
            ):
                return False
            least, most = int(counts[0]), int(counts[-1]) if counts[-1] else None
            if max(least, most or 0) > _MOST_REPEATS or (most is not None and most < least):
                return False
            self.out.append(self.text[self.i : end + 1])
            self.i = end + 1
        else:
            self.out.append(c)
            self.i += 1
        self.literal, self.quantifiable, self.quantified = None, False, True
        return True

    def _class(self) -> str | None:
        """A character class from `[` to its `]`, written out for RE2 (every member escaped)."""
        self.i += 1
        negated = self.text.startswith("^", self.i)
        self.i += negated
        members: list[str] = []
        while True:
            if self.i >= len(self.text):
                return None
            c = self.text[self.i]
            if c == "]":
                if not members:  # Java and RE2 read `[]...]` differently
                    return None
                self.i += 1
                return f"[{'^' if negated else ''}{''.join(members)}]"
            if c == "[" or self.text.startswith("&&", self.i):  # Java's union and intersection
                return None
            if self.text.startswith("\\", self.i) and self.text[self.i + 1 : self.i + 2] in _CLASSES:
                members.append(_CLASSES[self.text[self.i + 1]])
                self.i += 2
                continue
            first = self._class_character()
            if first is None:
                return None
            if first == "-" and members and not self.text.startswith("]", self.i):
                return None  # a `-` only at either end stands for itself
            if self.text.startswith("-", self.i) and not self.text.startswith("-]", self.i):
                self.i += 1
                last = self._class_character()
                if last is None or last < first or last == "-":
                    return None
                members.append(f"{_escaped(first, True)}-{_escaped(last, True)}")
            else:
                members.append(_escaped(first, True))

    def _class_character(self) -> str | None:
        """One character of a class, its escape read (None for a class escape or one outside the subset)."""
        c = self.text[self.i]
        if c != "\\":
            self.i += 1
            return c
        e = self.text[self.i + 1 : self.i + 2]
        self.i += 2
        return _CONTROLS.get(e, e if e in _PUNCTUATION else None)


def _escaped(c: str, in_class: bool = False) -> str:
    """Character `c` as RE2 reads it for itself (inside a class when `in_class`)."""
    if c in _CONTROLS.values():
        return {"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[c]
    special = "\\]^-[" if in_class else _META
    return "\\" + c if c in special else c
