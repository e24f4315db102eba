"""The name Spark gives a SELECT column written without AS: its expression in Spark's "pretty" SQL
(`sum(l_quantity)`, `count(1)`, `(price * 2)`, `CAST(k AS INT)`), so that a view's columns are named as the same
SELECT's are in Spark (issue 35). Columns print unqualified, string literals without quotes, every operator in
parentheses, function names in lower case; tests/spark/test_plan_spark_accepts.py compares these names with Spark's
own over the planner's corpus."""

from __future__ import annotations

from sqlglot import exp

# Operators Spark prints between its operands, in parentheses.
_BINARY: dict[type[exp.Expr], str] = {
    exp.Add: "+",
    exp.Sub: "-",
    exp.Mul: "*",
    exp.Div: "/",
    exp.Mod: "%",
    exp.EQ: "=",
    exp.NEQ: "!=",
    exp.GT: ">",
    exp.GTE: ">=",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.NullSafeEQ: "<=>",
    exp.And: "AND",
    exp.Or: "OR",
    exp.DPipe: "||",
    exp.BitwiseAnd: "&",
    exp.BitwiseOr: "|",
    exp.BitwiseXor: "^",
    exp.IntDiv: "div",
}


def spark_name(e: exp.Expr) -> str:
    """The column name Spark gives expression `e` written without an alias."""
    if isinstance(e, exp.Alias):
        return e.alias
    if isinstance(e, exp.Column):
        return e.name
    if isinstance(e, exp.Paren):
        return spark_name(e.this)
    if isinstance(e, exp.Literal):
        return e.name
    if isinstance(e, exp.Null):
        return "NULL"
    if isinstance(e, exp.Boolean):
        return "true" if e.this else "false"
    operator = _BINARY.get(type(e))
    if operator is not None and isinstance(e, exp.Binary):
        return f"({spark_name(e.left)} {operator} {spark_name(e.right)})"
    if isinstance(e, exp.Neg):
        return f"(- {spark_name(e.this)})"
    if isinstance(e, exp.Not):
        inner = e.this.this if isinstance(e.this, exp.Paren) else e.this
        if isinstance(inner, exp.Is):
            return f"({spark_name(inner.this)} IS NOT {spark_name(inner.expression)})"
        return f"(NOT {spark_name(e.this)})"
    if isinstance(e, exp.Is):
        return f"({spark_name(e.this)} IS {spark_name(e.expression)})"
    if isinstance(e, exp.Cast) and isinstance(e.this, exp.Column) and not e.args.get("safe"):
        return e.this.name  # Spark names a cast column by the column
    if isinstance(e, exp.Cast):  # sqlglot reads Spark's CAST as a TryCast; TRY_CAST sets `safe`
        function = "try_cast" if e.args.get("safe") else "CAST"
        return f"{function}({spark_name(e.this)} AS {e.to.sql('spark').upper()})"
    if isinstance(e, exp.In) and e.expressions:
        return f"({spark_name(e.this)} IN ({', '.join(spark_name(v) for v in e.expressions)}))"
    if isinstance(e, exp.Between):
        return f"({spark_name(e.this)} BETWEEN {spark_name(e.args['low'])} AND {spark_name(e.args['high'])})"
    if isinstance(e, exp.Case):
        whens = " ".join(
            f"WHEN {spark_name(w.this)} THEN {spark_name(w.args['true'])}" for w in e.args.get("ifs") or []
        )
        otherwise = f" ELSE {spark_name(e.args['default'])}" if e.args.get("default") is not None else ""
        subject = f" {spark_name(e.this)}" if e.this is not None else ""
        return f"CASE{subject} {whens}{otherwise} END"
    if isinstance(e, exp.Count) and (e.this is None or isinstance(e.this, exp.Star)):
        return "count(1)"
    if isinstance(e, exp.Func):
        return _function_name(e)
    return e.sql("spark")


def _function_name(e: exp.Func) -> str:
    """name(arg, ...) as Spark prints a call: the name in lower case as written (sqlglot's canonical name when
    it did not keep the written one), DISTINCT before the arguments."""
    name = (e.name if isinstance(e, exp.Anonymous) else e.sql_name()).lower()
    args = [a for a in e.args.values() if a is not None]
    flat: list[exp.Expression] = []
    for a in args:
        flat.extend(a if isinstance(a, list) else [a])
    distinct = ""
    if flat and isinstance(flat[0], exp.Distinct):
        distinct, flat = "DISTINCT ", list(flat[0].expressions) + flat[1:]
    return f"{name}({distinct}{', '.join(spark_name(a) for a in flat if isinstance(a, exp.Expression))})"
