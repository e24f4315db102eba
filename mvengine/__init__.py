"""mvengine: incremental materialized views on Delta Lake, computed by Apache Spark."""

from __future__ import annotations

__version__ = "0.1.0"
