"""The input of an operator whose rule works on plain columns (TopN, Over): a Project renaming the fields of any
child apart under one qualifier, `_in`, so that the rule works the same over a scan, a join (whose fields have
several qualifiers and may share names) or anything else."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace

from sqlglot import exp

from mvengine.plan.nodes import Node, Project

QUALIFIER = "_in"
_PLAIN = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


def flat_input(child: Node) -> tuple[Project, Callable[[exp.Expression], exp.Expression]]:
    """A Project renaming the child's fields apart under QUALIFIER (a plain name, unique and not starting with `_`,
    is kept; others become `_c<i>`: the rules name columns in Spark's column syntax), and the function moving an
    expression over the child's fields onto it."""
    lowered = [f.name.lower() for f in child.fields]
    fields = tuple(replace(f, name=f.name if lowered.count(f.name.lower()) == 1 and _PLAIN.fullmatch(f.name)
                           else f"_c{i}", qualifier=QUALIFIER) for i, f in enumerate(child.fields))
    flat = Project(fields=fields, child=child, projections=tuple(f.ref() for f in child.fields))
    where = {(f.name, f.qualifier): i for i, f in enumerate(child.fields)}

    def rename(e: exp.Expression) -> exp.Expression:
        def move(n: exp.Expression) -> exp.Expression:
            if isinstance(n, exp.Column) and (n.name, n.table or None) in where:
                return fields[where[(n.name, n.table or None)]].ref()
            return n
        return e.copy().transform(move)
    return flat, rename
