"""The operator registry (plan/operators): every plan node type has one module declaring its delta rule, its
append-only claim, its state and its reasons to fall back to full; analysis and the compiler ask it."""

from __future__ import annotations

import inspect
from dataclasses import dataclass

from sqlglot import exp

from mvengine.incremental.accumulators import BUILDERS, Accumulator
from mvengine.incremental.compiler import DRIVER_RULES, RULE_MODULES, RULES
from mvengine.incremental.driver_support import SPARK_FORMS
from mvengine.plan import nodes
from mvengine.plan.analysis import full_refresh_reasons, is_append_only, state_of
from mvengine.plan.nodes import Field, Node
from mvengine.plan.operators import operators
from mvengine.plan.operators.aggregate import ACCUMULATOR_KINDS, AggregateCall, accumulator_kind
from mvengine.plan.types import build


def _node_types() -> list[type[Node]]:
    return [
        c
        for _, c in inspect.getmembers(nodes, inspect.isclass)
        if issubclass(c, Node) and c not in (Node, nodes.Unary) and c.__module__ == nodes.__name__
    ]


def test_every_plan_node_type_has_an_operator():
    missing = [t.__name__ for t in _node_types() if t not in operators()]
    assert missing == [], f"plan nodes without an operator module (plan/operators): {missing}"


def test_an_operator_has_its_rules_or_states_why_not():
    ruled = {module.NODE: module for module in RULE_MODULES}
    assert len(ruled) == len(RULE_MODULES), "two rule modules maintain one node type"
    for node_type, operator in operators().items():
        if not operator.incremental:
            # No rule: it must say why the view is recomputed, whatever the node holds.
            reasons = operator.full_reasons(node_type(fields=()), lambda child: False)
            assert reasons and all(reasons), f"{node_type.__name__} has no rule and states no reason"
            assert node_type not in ruled and node_type not in RULES
            continue
        module = ruled.get(node_type)
        assert module is not None, (
            f"{node_type.__name__} is declared incremental, but no rule module maintains it"
        )
        if callable(getattr(module, "rule", None)):  # written once, for both engines (incremental/engine.py)
            assert operator.on_driver, f"{module.__name__} has one rule for both engines, but no driver form"
            assert not hasattr(module, "delta") and not hasattr(module, "driver_delta"), module.__name__
            assert node_type in RULES and node_type in DRIVER_RULES
            continue
        assert callable(getattr(module, "delta", None)), f"{module.__name__} has no delta rule"
        # (a Spark batch is finished on the driver only above such a node: its Spark form takes Spark's rows)
        assert issubclass(node_type, SPARK_FORMS), f"driver_support.SPARK_FORMS lacks {node_type.__name__}"
        assert RULES[node_type] is module.delta
        if operator.on_driver:
            assert DRIVER_RULES[node_type] is module.driver_delta
        else:
            assert node_type not in DRIVER_RULES


@dataclass(frozen=True, eq=False)
class Mystery(Node):
    """A node type no operator module declares."""


def test_analysis_asks_the_registry_and_refuses_an_unknown_node():
    unknown = Mystery(fields=(Field("x", build("INT"), True),))
    assert full_refresh_reasons(unknown) == ["Mystery has no incremental rule"]
    assert not is_append_only(unknown)
    assert state_of(unknown, "incremental").description == "none"


def test_every_expression_the_driver_claims_has_its_evaluator():
    """driver_support.EVALUATED is the one list of what the driver evaluates: `mv plan` promises the driver for
    what it holds, and the evaluator dispatches on it, so each entry needs its method."""
    from mvengine.incremental.driver_expressions import _Evaluator
    from mvengine.incremental.driver_support import ARITHMETIC, COMPARISONS, EVALUATED

    missing = [
        t.__name__
        for t in EVALUATED - COMPARISONS.keys() - ARITHMETIC.keys()
        if not callable(getattr(_Evaluator, f"_{t.__name__.lower()}", None))
    ]
    assert missing == []


def _call(kind: str, sql_type: str | None, distinct: bool = False) -> AggregateCall:
    argument = None
    if sql_type is not None:
        argument = exp.column("x")
        argument.type = build(sql_type)
    return AggregateCall(kind, argument, distinct)


def test_every_aggregate_kind_has_its_accumulator_and_every_call_a_kind():
    """The kinds of accumulator are declared once (plan/operators/aggregate.py, ACCUMULATOR_KINDS: what `mv plan`
    shows of their state, whether they keep a multiset, whether the driver runs them); the runtime builds one of
    each (incremental/accumulators.py, BUILDERS). The two name the same kinds, every kind is chosen for some
    call, and an accumulator keeps a multiset exactly when its kind says so."""
    assert set(BUILDERS) == set(ACCUMULATOR_KINDS)
    calls = [
        (_call("count", None), True),
        *[(_call(k, "BIGINT", distinct=True), True) for k in ("count", "sum")],
        *[(_call(k, t), True) for k in ("count", "sum", "avg") for t in ("INT", "DOUBLE", "DECIMAL(10,2)")],
        *[(_call(k, "BOOLEAN"), True) for k in ("bool_and", "bool_or")],
        *[(_call(k, "DOUBLE"), True) for k in ("stddev_samp", "stddev_pop", "var_samp", "var_pop")],
        *[
            (_call(k, "STRING"), claim)
            for k in ("min", "max", "first", "last", "list")
            for claim in (True, False)
        ],
    ]
    chosen = {}
    for call, append_only in calls:
        kind = accumulator_kind(call, append_only)
        assert kind in ACCUMULATOR_KINDS, (call, kind)
        chosen[kind] = call
    assert set(chosen) == set(ACCUMULATOR_KINDS), set(ACCUMULATOR_KINDS) - set(chosen)
    for kind, call in chosen.items():
        built = Accumulator(0, "x", call.argument, "double")
        BUILDERS[kind](built, call, "double")
        assert built.result, kind  # every accumulator declares its result
        assert (built.how is not None) == ACCUMULATOR_KINDS[kind].multiset, kind
        # a multiset's value is its only column, and the only one no partial computes
        assert all((c.partial is None) == (built.how is not None) for c in built.columns), kind


def test_a_spark_batch_is_finished_on_the_driver_only_from_rules_written_once(tmp_path):
    """incremental/hand_off.py takes over from the view's top rule that keeps state, through rules of one input
    written once for both engines: not below window functions (a form per engine), nor a join."""
    from mvengine.config import load_config
    from mvengine.incremental.driver_support import driver_finishes
    from mvengine.project.catalog import load_catalog

    (tmp_path / "views").mkdir()
    (tmp_path / "views" / "v.sql").write_text(
        """
        CREATE TABLE t (k INT, g STRING, v INT);
        CREATE MATERIALIZED VIEW totals AS SELECT g, SUM(v) AS s FROM t GROUP BY g HAVING COUNT(*) > 1;
        CREATE MATERIALIZED VIEW top AS SELECT g, s FROM (SELECT g, SUM(v) AS s FROM t GROUP BY g)
          ORDER BY s DESC LIMIT 3;
        CREATE MATERIALIZED VIEW ranked AS SELECT g, k, s, RANK() OVER (PARTITION BY g ORDER BY s) AS r
          FROM (SELECT g, k, SUM(v) AS s FROM t GROUP BY g, k) AS a;
        CREATE MATERIALIZED VIEW rows_only AS SELECT k, v FROM t WHERE v > 0;
        """
    )
    plans = load_catalog(load_config(tmp_path)).plans
    finishing = {name: len(driver_finishes(plan.root)) for name, plan in plans.items()}
    assert finishing["totals"] >= 2 and finishing["top"] >= 2  # (the filter or top-N, and the aggregate)
    assert finishing["ranked"] == 0 and finishing["rows_only"] == 0
