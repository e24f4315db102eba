"""What the driver computes (incremental/driver.py), known from a view's plan alone: every operator has a driver
rule (plan/operators), and every expression is in the subset that driver_expressions evaluates exactly as Spark does. No
pyarrow and no pyspark here, so that `mv plan` can say it without loading either."""

from __future__ import annotations

import re

from sqlglot import exp

from mvengine.incremental.java_regex import translate
from mvengine.plan.analysis import is_append_only
from mvengine.plan.functions import aggregate_function, function_name
from mvengine.plan.nodes import Aggregate, Filter, Node, Over, SessionAggregate, TopN
from mvengine.plan.operators import operator_of
from mvengine.plan.operators.aggregate import ACCUMULATOR_KINDS, accumulator_kind, incremental_call
from mvengine.plan.time_bounds import at_clock, clock_bounds

COMPARISONS: dict[type[exp.Expr], str] = {
    exp.EQ: "equal",
    exp.NEQ: "not_equal",
    exp.GT: "greater",
    exp.GTE: "greater_equal",
    exp.LT: "less",
    exp.LTE: "less_equal",
}
ARITHMETIC: dict[type[exp.Expr], str] = {
    exp.Add: "add_checked",
    exp.Sub: "subtract_checked",
    exp.Mul: "multiply_checked",
}
# The expressions the driver evaluates, by exact type: driver_expressions' evaluator dispatches on this table
# (comparisons and arithmetic to their own methods, every other type to its method `_<type name>`), and
# `unsupported` checks a plan's expressions against it, so the subset is written down once.
EVALUATED: frozenset[type[exp.Expr]] = frozenset(
    {
        exp.Column,
        exp.Paren,
        exp.Alias,
        exp.Literal,
        exp.Boolean,
        exp.Null,
        exp.Cast,
        exp.Neg,
        exp.Not,
        exp.And,
        exp.Or,
        exp.Is,
        exp.In,
        exp.Between,
        exp.NullSafeEQ,
        exp.NullSafeNEQ,
        exp.Div,
        exp.Mod,
        exp.Case,
        exp.If,
        exp.Coalesce,
        exp.Upper,
        exp.Lower,
        exp.Length,
        exp.Replace,
        exp.Abs,
        exp.Concat,
        exp.DPipe,
        exp.ILike,
        exp.TimeToStr,
        exp.TsOrDsToDate,
        exp.Year,
        exp.Month,
        exp.Day,
        exp.DayOfMonth,
        exp.Hour,
        exp.TsOrDsAdd,
        exp.DateDiff,
        exp.Minute,
        exp.Extract,
        exp.TimestampTrunc,
        exp.DateTrunc,
        exp.Trim,
        exp.ConcatWs,
        exp.Substring,
        exp.Like,
        exp.Escape,
        exp.TryCast,
        exp.Greatest,
        exp.Least,
        exp.IsNan,
        exp.RegexpExtract,
        exp.RegexpLike,
        exp.Bracket,
        exp.SplitPart,
        exp.Anonymous,  # the engine's own functions only (incremental/functions.py)
        *COMPARISONS,
        *ARITHMETIC,
    }
)
# Parts of an expression that its parent evaluates with it (a CAST's type, an interval's amount and unit, the
# split an index takes an element of).
PARTS: frozenset[type[exp.Expr]] = frozenset(
    {exp.DataType, exp.DataTypeParam, exp.Interval, exp.RegexpSplit}  # (a split: of an index [i])
)
# DATE_FORMAT's pattern letters whose strftime equivalents print what Spark prints (zero-padded numbers), and
# the other characters a pattern may hold on the driver.
_PATTERN_LETTERS = {"yyyy": "%Y", "MM": "%m", "dd": "%d", "HH": "%H", "mm": "%M", "ss": "%S"}
_PATTERN = re.compile(r"[A-Za-z]+|[-:/ ._,]")


def not_on_driver(root: Node, expiring: bool = False) -> str | None:
    """Why the view's batches can never be computed on the driver (None when small ones can); `expiring`: the
    view has a state_ttl."""
    for node in root.walk():
        reason = node_not_on_driver(node, expiring)
        if reason is not None:
            return reason
    return None


def node_not_on_driver(node: Node, expiring: bool = False) -> str | None:
    """Why the driver never computes this node's rule (None when it does), whatever its children."""
    operator = operator_of(node)
    if operator is None or not operator.on_driver:
        return f"{type(node).__name__} has no driver rule: Spark computes it"
    for e in _evaluated(node):
        reason = unsupported(e)
        if reason is not None:
            return f"{node.describe()}: {reason}"
    if isinstance(node, TopN) and any(
        c.meta.get("proctime") for e in node.expressions() for c in e.find_all(exp.Column)
    ):
        return f"{node.describe()}: an order by PROCTIME() (Spark keeps each row's arrival time)"
    if isinstance(node, (SessionAggregate, Over)):  # (rules over partition_rows.py's rows)
        if expiring:
            return f"{node.describe()}: partitions expiring (state_ttl), which Spark computes"
        reason = session_unsupported(node) if isinstance(node, SessionAggregate) else over_unsupported(node)
        if reason is not None:
            return f"{node.describe()}: {reason}"
    elif isinstance(node, Aggregate):
        append_only = is_append_only(node.child)
        for agg in node.aggregates:
            if not ACCUMULATOR_KINDS[accumulator_kind(incremental_call(agg), append_only)].on_driver:
                name = function_name(aggregate_function(agg)).upper()
                return f"{node.describe()}: {name} (its accumulator is computed by Spark)"
    return None


# The nodes whose delta rule has a form per engine (incremental/over.py, session_window.py), not one rule that
# either engine runs: a Spark batch's form of theirs takes Spark's changes only.
SPARK_FORMS: tuple[type[Node], ...] = (Over, SessionAggregate)


def driver_finishes(root: Node, expiring: bool = False) -> frozenset[int]:
    """The nodes (by id) whose rules may finish on the driver a batch that Spark started
    (incremental/hand_off.py): from the root down while each node has one input and a driver rule written
    once for both engines, to the lowest of them that keeps state (whose rule reduces its input to what it
    keeps); none without one. A node of two inputs ends them: the input Spark computes would meet the one the
    driver does; so does a rule of a form per engine (SPARK_FORMS)."""
    chain: list[Node] = []
    node = root
    while not isinstance(node, SPARK_FORMS) and node_not_on_driver(node, expiring) is None:
        chain.append(node)
        if len(node.children) != 1:
            break
        node = node.children[0]
    keeping = [i for i, n in enumerate(chain) if len(n.children) == 1 and _keeps_state(n)]
    return frozenset(id(n) for n in chain[: keeping[-1] + 1]) if keeping else frozenset()


def _keeps_state(node: Node) -> bool:
    operator = operator_of(node)
    return operator is not None and operator.state(node, is_append_only, False) is not None


# The aggregates the driver computes over a session's rows (incremental/session_window.py), and the types of
# their column: SUM of integers only (exact, in any order), MIN and MAX of no floating point (NaN orders apart).
_SESSION_AGGREGATES = {
    "count": None,
    "sum": {"TINYINT", "SMALLINT", "INT", "BIGINT"},
    "min": None,
    "max": None,
}
_UNORDERED = {"FLOAT", "DOUBLE", "ARRAY", "MAP", "STRUCT", "VARIANT"}


def session_unsupported(node: SessionAggregate) -> str | None:
    """What of a session window's aggregates the driver does not compute (None when it computes them all)."""
    time = node.window.time.type
    if time is None or time.this.value not in ("TIMESTAMP", "TIMESTAMPNTZ", "TIMESTAMPTZ", "TIMESTAMPLTZ"):
        return "a session window over a time that is not a TIMESTAMP"
    for call in node.aggregates:
        f = aggregate_function(call)
        name = function_name(f).upper()
        argument = f.this
        if call is not f or function_name(f) not in _SESSION_AGGREGATES:
            return f"{call.sql('spark')} over a session (Spark computes it)"
        if isinstance(argument, exp.Star) and name == "COUNT":
            continue
        if not isinstance(argument, exp.Column) or argument.type is None:
            return f"{name} of an expression over a session (Spark computes it)"
        kind = argument.type.this.value
        types = _SESSION_AGGREGATES[function_name(f)]
        if (types is not None and kind not in types) or (name in ("MIN", "MAX") and kind in _UNORDERED):
            return f"{name} of a {kind} over a session (Spark computes it)"
    return None


# The window functions the driver evaluates (incremental/over.py), and the types of their argument: SUM and AVG
# of integers and floating point (DECIMAL's types are Spark's to choose), MIN and MAX of what orders as one.
_RANKINGS = (exp.RowNumber, exp.Rank, exp.DenseRank)
_OFFSETS = (exp.Lag, exp.Lead)
_WINDOW_AGGREGATES = (exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max)
_SUMMED = {"TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE"}


def over_unsupported(node: Over) -> str | None:
    """What of a node's window functions and frames the driver does not evaluate (None when it does them all)."""
    for window in node.windows:
        f = window.this
        name = f.sql_name() if isinstance(f, exp.Func) else type(f).__name__.upper()
        if isinstance(f, _RANKINGS):
            continue
        if isinstance(f, _OFFSETS):
            offset, default = f.args.get("offset"), f.args.get("default")
            if offset is not None and not (isinstance(offset, exp.Literal) and offset.is_int):
                return f"{name} by an offset that is not an integer (Spark computes it)"
            if not (
                default is None or isinstance(default, exp.Null) or _same_kind(default.type, f.this.type)
            ):
                return f"{name} with a default of another type than its value (Spark computes it)"
            continue
        if not isinstance(f, _WINDOW_AGGREGATES) or isinstance(f.this, exp.Distinct):
            return f"{name} over a window (Spark computes it)"
        reason = _frame_unsupported(window)
        if reason is not None:
            return f"{name} over {reason} (Spark computes it)"
        if isinstance(f.this, exp.Star):
            continue
        kind = "an unknown type" if f.this.type is None else f.this.type.this.value
        if isinstance(f, (exp.Sum, exp.Avg)) and kind not in _SUMMED:
            return f"{name} of a {kind} over a window (Spark computes it)"
        if isinstance(f, (exp.Sum, exp.Avg)) and kind in ("FLOAT", "DOUBLE") and not window.args.get("order"):
            return f"{name} of a {kind} over a window of no order (Spark adds it up in any order)"
        if isinstance(f, (exp.Min, exp.Max)) and (f.this.type is None or kind in _UNORDERED):
            return f"{name} of a {kind} over a window (Spark computes it)"
    return None


def _same_kind(a: exp.DataType | None, b: exp.DataType | None) -> bool:
    """Whether a value of type `a` stands in for one of `b` as Spark coerces it: the same type, or both strings,
    or both integers."""
    if a is None or b is None:
        return False
    kinds = (exp.DataType.TEXT_TYPES, exp.DataType.INTEGER_TYPES)
    return a == b or any(a.this in k and b.this in k for k in kinds)


def _frame_unsupported(window: exp.Window) -> str | None:
    """What of a window's frame the driver does not evaluate: ROWS frames of any integer bounds, RANGE frames
    bounded by UNBOUNDED and CURRENT ROW only."""
    spec = window.args.get("spec")
    if spec is None:
        return None
    bounds = [spec.args.get("start"), spec.args.get("end")]
    if str(spec.args.get("kind")).upper() == "RANGE":
        if any(isinstance(b, exp.Expression) for b in bounds):
            return "a RANGE frame of offsets"  # (of ORDER BY values: Spark's)
        return None
    if any(isinstance(b, exp.Expression) and not (isinstance(b, exp.Literal) and b.is_int) for b in bounds):
        return "a frame bound that is not an integer"
    return None


def _evaluated(node: Node) -> list[exp.Expression]:
    """The expressions the driver evaluates for a node (an aggregate's arguments, not its calls; a window's
    arguments; a temporal filter's predicate with NOW() read as an instant)."""
    if isinstance(node, Filter) and clock_bounds(node) is not None:
        return [at_clock(node.predicate, 0)]
    if isinstance(node, Over):  # (COUNT(*)'s star is no value)
        return [e for e in node.expressions() if not isinstance(e, exp.Star)]
    if not isinstance(node, Aggregate):
        return node.expressions()
    arguments = [
        call.argument for call in map(incremental_call, node.aggregates) if call.argument is not None
    ]
    return [*node.groups, *arguments]


def unsupported(e: exp.Expression) -> str | None:
    """What in `e` the driver does not evaluate (None when everything is in the subset)."""
    for node in e.walk():
        if isinstance(node, exp.Identifier) or isinstance(node.parent, exp.Column):
            continue
        if isinstance(node, exp.TimeStrToTime) and isinstance(node.parent, exp.TimeToStr):
            continue  # sqlglot's reading of DATE_FORMAT's implicit cast: of a timestamp or date, none
        if isinstance(node, exp.Var) and isinstance(
            node.parent, (exp.TsOrDsAdd, exp.DateDiff, exp.Extract, exp.TimestampTrunc, exp.Interval)
        ):
            continue  # a unit of DATE_ADD, DATEDIFF, EXTRACT, DATE_TRUNC or INTERVAL (the evaluator says which)
        if isinstance(node, exp.Anonymous) and not (
            node.name.lower().startswith("mv_") or node.name.lower() == "timestamp_micros"
        ):
            return f"the function {node.name}"
        if type(node) not in EVALUATED and type(node) not in PARTS:
            return f"{type(node).__name__.lower()} ({node.sql('spark')[:60]})"
        if isinstance(node, exp.In) and (node.args.get("query") or node.args.get("unnest")):
            return "IN (subquery)"
        if isinstance(node, exp.TimeToStr) and strftime_pattern(node) is None:
            return f"date_format pattern ({node.sql('spark')[:60]})"
        if isinstance(node, (exp.RegexpExtract, exp.RegexpLike, exp.RegexpSplit, exp.Bracket)):
            reason = _regex_unsupported(node)
            if reason is not None:
                return f"{reason} ({node.sql('spark')[:60]})"
    return None


def _regex_unsupported(e: exp.Expression) -> str | None:
    """What the driver does not evaluate of a regexp_extract, RLIKE or split (an index of it): a pattern that is
    not a string literal in the subset RE2 matches as Java does (incremental/java_regex.py), a group not among
    the pattern's, a split by more than a fixed string, an array of a split taken whole."""
    if isinstance(e, exp.Bracket):
        offset = e.args.get("offset") or 0
        if not isinstance(e.this, exp.RegexpSplit) or len(e.expressions) != 1 or e.args.get("safe"):
            return "an array index of other than split"
        return None if offset in (0, 1) else f"an array index from {offset}"
    pattern = e.expression
    found = translate(pattern.name) if isinstance(pattern, exp.Literal) and pattern.is_string else None
    if found is None:
        return "a pattern that is not a string literal RE2 reads as Java does"
    if isinstance(e, exp.RegexpExtract):
        group = e.args.get("group")
        others = ("position", "occurrence", "parameters")
        if not (isinstance(group, exp.Literal) and group.is_int) or any(e.args.get(a) for a in others):
            return "regexp_extract of other than a literal group"
        if not 0 <= int(group.name) <= found.groups:
            return f"group {group.name} of a pattern with {found.groups}"  # (Spark's error when one matches)
    if isinstance(e, exp.RegexpLike) and (e.args.get("flag") or e.args.get("full_match")):
        return "a regexp match with flags"
    if isinstance(e, exp.RegexpSplit):
        limit = e.args.get("limit")
        if not (isinstance(e.parent, exp.Bracket) and e.parent.this is e):
            return "split's array (the driver takes one element of it)"
        if not found.literal or not (limit is None or (isinstance(limit, exp.Literal) and limit.is_int)):
            return "split by other than a fixed string"
    return None


def strftime_pattern(e: exp.TimeToStr) -> str | None:
    """DATE_FORMAT(x, pattern)'s pattern as Arrow's strftime format, when it is made of yyyy, MM, dd, HH, mm, ss
    and separators only (None otherwise: other letters print text, or differ between Java and strftime)."""
    found = re.fullmatch(r"DATE_FORMAT\(.*, '([^'\\]*)'\)", e.sql("spark"), flags=re.DOTALL)
    if found is None:
        return None
    pattern = found.group(1)
    tokens = _PATTERN.findall(pattern)
    if "".join(tokens) != pattern or any(tok.isalpha() and tok not in _PATTERN_LETTERS for tok in tokens):
        return None
    return "".join(_PATTERN_LETTERS.get(tok, tok) for tok in tokens)
