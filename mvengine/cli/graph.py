"""The DAG of sources and views as Mermaid, Graphviz DOT, or an SVG/PNG image drawn by Graphviz's `dot`.

Node kinds look different: sources are cylinders, incremental views rounded green boxes, full-refresh views
dashed red boxes (labelled with why they are refreshed in full).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from mvengine.errors import MvError
from mvengine.project.catalog import Catalog

FORMATS = ("mermaid", "dot", "svg", "png")


def node_kind(catalog: Catalog, name: str) -> str:
    if name in catalog.sources:
        return "source"
    return "incremental" if catalog.plans[name].strategy == "incremental" else "full"


def _label(catalog: Catalog, name: str) -> list[str]:
    kind = node_kind(catalog, name)
    if kind == "source":
        source = catalog.sources[name]
        return [name, "source, append-only" if source.append_only else "source"]
    plan = catalog.plans[name]
    return [name, f"{plan.strategy}, {plan.changelog}"]


def to_mermaid(catalog: Catalog) -> str:
    ids = {name: f"n{i}" for i, name in enumerate(catalog.order)}
    shapes = {"source": ('[("', '")]'), "incremental": ('("', '")'), "full": ('{{"', '"}}')}
    lines = ["flowchart LR"]
    for name in catalog.order:
        kind = node_kind(catalog, name)
        open_, close = shapes[kind]
        text = "<br/>".join(_mermaid_escape(t) for t in _label(catalog, name))
        lines.append(f"  {ids[name]}{open_}{text}{close}:::{kind}")
    for a, b in catalog.graph.edges:
        lines.append(f"  {ids[a]} --> {ids[b]}")
    lines += [
        "  classDef source fill:#e8f0fe,stroke:#4a6fa5",
        "  classDef incremental fill:#e6f4ea,stroke:#34a853",
        "  classDef full fill:#fdecea,stroke:#d93025,stroke-dasharray:4 2",
    ]
    return "\n".join(lines) + "\n"


def to_dot(catalog: Catalog) -> str:
    styles = {
        "source": 'shape=cylinder, style=filled, fillcolor="#e8f0fe", color="#4a6fa5"',
        "incremental": 'shape=box, style="rounded,filled", fillcolor="#e6f4ea", color="#34a853"',
        "full": 'shape=box, style="dashed,filled", fillcolor="#fdecea", color="#d93025"',
    }
    lines = ["digraph mvengine {", "  rankdir=LR;", '  node [fontname="Helvetica"];']
    for name in catalog.order:
        label = "\\n".join(_dot_escape(t) for t in _label(catalog, name))
        lines.append(f'  "{_dot_escape(name)}" [label="{label}", {styles[node_kind(catalog, name)]}];')
    for a, b in catalog.graph.edges:
        lines.append(f'  "{_dot_escape(a)}" -> "{_dot_escape(b)}";')
    lines.append("}")
    return "\n".join(lines) + "\n"


def render_image(dot_text: str, fmt: str, out: Path) -> None:
    """Draw with Graphviz's `dot`; a clear error when it is not installed."""
    dot = shutil.which("dot")
    if dot is None:
        raise MvError(
            f"--format {fmt} needs Graphviz's `dot` program, which is not installed",
            hint="install Graphviz (e.g. apt-get install graphviz, brew install graphviz), "
            "or use --format mermaid or --format dot",
        )
    result = subprocess.run([dot, f"-T{fmt}", "-o", str(out)], input=dot_text, text=True, capture_output=True)
    if result.returncode != 0:
        raise MvError(f"Graphviz could not draw the graph: {result.stderr.strip()}")


def _mermaid_escape(text: str) -> str:
    return text.replace("&", "#amp;").replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;")


def _dot_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')
