"""The dependency DAG of sources and views (networkx): an edge `a -> v` means view v reads a."""

from __future__ import annotations

import networkx as nx
from sqlglot import exp

from mvengine.errors import SqlError
from mvengine.sql.views import ViewDef


def referenced_names(query: exp.Expr) -> list[str]:
    """Names of the tables a query reads (CTE names excluded), in order of appearance, as written."""
    ctes = {cte.alias.lower() for cte in query.find_all(exp.CTE)}
    names: list[str] = []
    for table in query.find_all(exp.Table):
        if (
            isinstance(table.this, exp.Identifier)
            and table.name.lower() not in ctes
            and table.name not in names
        ):
            names.append(table.name)
    return names


def build_dag(source_names: list[str], views: list[ViewDef]) -> nx.DiGraph:
    """Nodes in declaration order (sources first) with `kind`; edges from every known input to its readers.

    A reference to an unknown name adds no edge: the view's planning reports it with its position.
    """
    graph = nx.DiGraph()
    for name in source_names:
        graph.add_node(name, kind="source")
    for view in views:
        graph.add_node(view.name, kind="view")
    canonical = {n.lower(): n for n in graph.nodes}
    for view in views:
        for name in referenced_names(view.query):
            if name.lower() in canonical:
                graph.add_edge(canonical[name.lower()], view.name)
    return graph


def check_acyclic(graph: nx.DiGraph, views: dict[str, ViewDef]) -> None:
    """A cycle of views is an error that prints the cycle as `a -> b -> a`."""
    try:
        cycle = nx.find_cycle(graph)
    except nx.NetworkXNoCycle:
        return
    names = [edge[0] for edge in cycle]
    first = min(names, key=lambda n: list(views).index(n))
    start = names.index(first)
    path = names[start:] + names[:start] + [first]
    view = views[first]
    raise SqlError(
        f"views read each other in a cycle: {' -> '.join(path)}",
        file=view.file,
        line=view.line,
        obj=f"view {first}",
        hint="a view cannot depend on itself; break the cycle",
    )


def topological_order(graph: nx.DiGraph) -> list[str]:
    """Every node after its inputs; among nodes that could go in any order, declaration order."""
    position = {name: i for i, name in enumerate(graph.nodes)}
    return list(nx.lexicographical_topological_sort(graph, key=position.__getitem__))
