"""The input of an operator whose rule works on plain columns (TopN, Over): a Project renaming the fields of any
child apart under one qualifier, `_in`, so that the rule works the same over a scan, a join (whose fields have
several qualifiers and may share names) or anything else."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Protocol, TypeVar

from sqlglot import exp

from mvengine.plan.nodes import Node, Project

QUALIFIER = "_in"
_PLAIN = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
E = TypeVar("E", bound=exp.Expression)


class Rename(Protocol):
    """Moves an expression over a child's fields onto its flat input; the expression keeps its node type."""

    def __call__(self, e: E, /) -> E: ...


def flat_input(child: Node) -> tuple[Project, Rename]:
    """A Project renaming the child's fields apart under QUALIFIER (a plain name, unique and not starting with `_`,
    is kept; others become `_c<i>`: the rules name columns in Spark's column syntax), and the function moving an
    expression over the child's fields onto it."""
    lowered = [f.name.lower() for f in child.fields]
    fields = tuple(
        replace(
            f,
            name=f.name if lowered.count(f.name.lower()) == 1 and _PLAIN.fullmatch(f.name) else f"_c{i}",
            qualifier=QUALIFIER,
        )
        for i, f in enumerate(child.fields)
    )
    flat = Project(fields=fields, child=child, projections=tuple(f.ref() for f in child.fields))
    where = {(f.name, f.qualifier): i for i, f in enumerate(child.fields)}

    def rename(e: E, /) -> E:
        def move(n: exp.Expression) -> exp.Expression:
            if isinstance(n, exp.Column) and (n.name, n.table or None) in where:
                return fields[where[(n.name, n.table or None)]].ref()
            return n

        moved = e.copy().transform(move)
        assert type(moved) is type(e)  # only columns are replaced, and by columns
        return moved

    return flat, rename
