"""What a delta rule sees of one batch: the changes of every input, the view's state, and Spark."""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession

from mvengine.incremental.state import StateStore
from mvengine.plan.nodes import Node


@dataclass
class Batch:
    spark: SparkSession
    changes: dict[str, DataFrame]  # input name → Z-set of its rows (its columns, _w, _mtime)
    state: StateStore
    node_ids: dict[int, int] = field(default_factory=dict)  # id(node) → its position in the plan (names state)
    checkpoints: list[DataFrame] = field(default_factory=list)  # released when the batch ends

    def node_id(self, node: Node) -> int:
        return self.node_ids[id(node)]

    def keep(self, df: DataFrame, *, eager: bool = False) -> DataFrame:
        """Compute a DataFrame used more than once in the batch only once (`eager`: now), and cut its plan:
        the rules stack many operators, and Spark analyses the whole plan again at each one. Released when
        the batch ends."""
        df = df.localCheckpoint(eager=eager)
        self.checkpoints.append(df)
        return df

    def release(self) -> None:
        for df in self.checkpoints:
            df._jdf.queryExecution().analyzed().rdd().unpersist(False)  # the checkpoint's blocks
        self.checkpoints.clear()
