"""mvengine: incremental materialized views on Delta Lake, computed by Apache Spark.

`from mvengine import Project` is the Python API (mvengine.api); it is imported on first use, so that the
`mv` command starts fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["Project", "__version__"]

if TYPE_CHECKING:
    from mvengine.api import Project


def __getattr__(name: str) -> Any:
    if name == "Project":
        from mvengine.api import Project

        return Project
    raise AttributeError(f"module 'mvengine' has no attribute {name!r}")
