"""Running windows under a lateness (plan/operators/over.running): ROW_NUMBER, RANK, DENSE_RANK, and COUNT, SUM,
MIN, MAX and AVG from UNBOUNDED PRECEDING to the current row, all in one order that starts with the event time.
A row's values depend on the rows before it only through what they fold to, and once the late cutoff passes a
row no row to come sorts before it (incremental/lateness.py sets those aside). So each batch the rule
(incremental/over.py) folds every state row behind the cutoff out of state (incremental/partition_rows.py's
`fold` and `swept`), whether or not the batch touches its partition, into one carry row per partition, state
table `n<i>_carry` keyed by the partition's values (`_p0`, `_p1`, ...): per window, its running value at the last
row folded (the rows folded, for ROW_NUMBER and RANK; the peer groups, for DENSE_RANK; an AVG's sum and count).
A partition's state is then its rows on time, and that row.

The windows are rewritten here to be evaluated over the carry row and the rows after it by either engine's
evaluator of windows: the carry row sorts first (`_row` 0), and each window reads its carry on that row and the
input's values on the others. A sum goes on adding, in Spark's order, from where the folded rows left it; a rank
and a count start from the folded rows' count. The rewritten windows at a partition's last folded row are the
new carry."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pyarrow as pa
from sqlglot import exp

from mvengine.plan.nodes import Field, Over
from mvengine.sql.types import arrow_type

ROW = "_row"  # 0: a partition's carry row; 1: an input row
CARRY_ROW, INPUT_ROW = 0, 1
_BIGINT = exp.DataType.build("BIGINT")
_DOUBLE = exp.DataType.build("DOUBLE")
_INT = exp.DataType.build("INT")
_GROWING = exp.WindowSpec(kind="ROWS", start="UNBOUNDED", start_side="PRECEDING", end="CURRENT ROW")


@dataclass(frozen=True)
class Carry:
    """An Over node's windows as evaluated over a partition's carry row and its rows."""

    node: Over  # the evaluated windows, partitioned by the partition's values (`parts`), the carry row first
    fields: tuple[Field, ...]  # the rows evaluated: the input's fields, `parts`, `_row`, then the carries
    parts: tuple[str, ...]  # the partition's values (`_p0`, ...), the carry table's key
    carries: tuple[Field, ...]  # the carry table's other columns
    outputs: tuple[
        exp.Expression, ...
    ]  # each window's value, over `fields` and the evaluated windows (`values`)
    folded: tuple[exp.Expression, ...]  # each carry's new value, at a partition's last folded row (the same)
    position: exp.Column  # the evaluated window that is a row's position in its partition

    @property
    def values(self) -> tuple[Field, ...]:
        """The evaluated windows' values, as fields after `fields` (their types do not matter)."""
        return tuple(Field(f"_v{k}", _BIGINT, True) for k in range(len(self.node.windows)))

    def arrow_types(self) -> list[pa.DataType]:
        """The carries' Arrow types (as the driver writes them)."""
        return [arrow_type(f.type) for f in self.carries]


def carry_of(node: Over) -> Carry:
    n = len(node.child.fields)
    parts = tuple(f"_p{i}" for i in range(len(node.partition)))
    order = node.windows[0].args["order"].expressions  # (plan/operators/over.running: one order for all)
    windows: list[exp.Window] = []

    def evaluated(f: exp.Expression, spec: exp.Expression | None = None) -> exp.Column:
        windows.append(
            exp.Window(
                this=f,
                partition_by=[_column(p) for p in parts],
                order=exp.Order(
                    expressions=[
                        exp.Ordered(this=_column(ROW), desc=False, nulls_first=True),
                        *(o.copy() for o in order),
                    ]
                ),
                spec=spec.copy() if spec is not None else None,
            )
        )
        return _column(f"_v{len(windows) - 1}")

    position = evaluated(exp.RowNumber())
    carries: list[Field] = []
    outputs: list[exp.Expression] = []
    folded: list[exp.Expression] = []
    for j, (window, field) in enumerate(zip(node.windows, node.fields[n:])):
        f, spec, carry = window.this, window.args.get("spec"), f"_carry{j}"
        on_carry_row = exp.EQ(this=_column(ROW), expression=exp.Literal.number(CARRY_ROW))
        if isinstance(f, (exp.RowNumber, exp.Rank, exp.DenseRank)):
            # The carry row ranks first, alone: the rows after it rank one further on than they would, and
            # the folded rows (their peer groups, for DENSE_RANK) before them make up the rest: a running sum
            # of what the carry row alone adds (in the windows' one order, so that no other sort is needed).
            less_one = exp.Sub(this=_column(carry), expression=exp.Literal.number(1))
            offset = evaluated(exp.Sum(this=_case(on_carry_row, less_one, 0)), _GROWING)
            value = evaluated(f.copy())
            carries.append(Field(carry, _BIGINT, True))
            outputs.append(exp.Cast(this=exp.Add(this=value, expression=offset.copy()), to=_INT))
            counted = value if isinstance(f, exp.DenseRank) else position
            folded.append(exp.Add(this=counted.copy(), expression=offset.copy()))
            continue
        argument = f.this
        if isinstance(f, exp.Count):
            counts = exp.Literal.number(1) if isinstance(argument, exp.Star) else _counted(argument)
            value = evaluated(exp.Sum(this=_case(on_carry_row, _column(carry), counts)), spec)
            carries.append(Field(carry, _BIGINT, True))
            outputs.append(exp.Cast(this=value, to=_BIGINT))
            folded.append(value.copy())
        elif isinstance(f, exp.Avg):  # (as Spark's: a DOUBLE sum of the values, and their count)
            as_double = exp.Cast(this=argument.copy(), to=_DOUBLE.copy())
            total = evaluated(exp.Sum(this=_case(on_carry_row, _column(carry), as_double)), spec)
            count = evaluated(
                exp.Sum(this=_case(on_carry_row, _column(f"{carry}_n"), _counted(argument))), spec
            )
            carries += [Field(carry, _DOUBLE, True), Field(f"{carry}_n", _BIGINT, True)]
            none = exp.EQ(this=count.copy(), expression=exp.Literal.number(0))
            outputs.append(exp.Div(this=total, expression=_case(none, exp.Null(), count)))
            folded += [total.copy(), count.copy()]
        else:  # SUM, MIN, MAX: of the carry, then the values
            value = evaluated(type(f)(this=_case(on_carry_row, _column(carry), argument.copy())), spec)
            carries.append(Field(carry, field.type, True))
            outputs.append(exp.Cast(this=value, to=field.type.copy()))
            folded.append(value.copy())
    row = Field(ROW, _INT, False)
    part_fields = [Field(p, e.type or _BIGINT, True) for p, e in zip(parts, node.partition)]
    rewritten = replace(node, windows=tuple(windows))
    fields = (*node.child.fields, *part_fields, row, *carries)
    return Carry(rewritten, fields, parts, tuple(carries), tuple(outputs), tuple(folded), position)


def _column(name: str) -> exp.Column:
    return exp.column(name, quoted=True)


def _case(condition: exp.Expression, then: exp.Expression, otherwise: exp.Expression | int) -> exp.Case:
    default = exp.Literal.number(otherwise) if isinstance(otherwise, int) else otherwise
    return exp.Case(ifs=[exp.If(this=condition.copy(), true=then)], default=default)


def _counted(argument: exp.Expression) -> exp.Case:
    """1 where `argument` is not NULL, else 0: what COUNT(argument) adds for a row."""
    return _case(exp.Not(this=exp.Is(this=argument.copy(), expression=exp.Null())), exp.Literal.number(1), 0)
