"""What one batch of a view did: the line `mv refresh` prints, and its phases for `--profile`."""

from __future__ import annotations

from dataclasses import dataclass, field

from mvengine.runtime.expectations import Outcome
from mvengine.runtime.profile import Phase


@dataclass
class BatchReport:
    view: str
    batch_id: int
    kind: str
    inputs: dict[str, int]
    rows_in: int | None  # None for a recomputation, which reads whole inputs
    rows_out: int
    millis: int
    note: str = ""
    phases: list[Phase] = field(default_factory=list)  # where the time went (runtime/profile.py)
    engine: str = "spark"  # "driver" when the batch was computed on the driver (incremental/driver.py)
    expectations: list[Outcome] = field(default_factory=list)  # of its sources' and its own (expectations.py)
    # On the driver: input rows read as they were before the batch (emit.ViewChanges.rows_read); None: not
    # counted (in Spark, or a recomputation, which reads whole inputs)
    rows_read: int | None = None
    expired: int = 0  # the keys its state_ttl expired (they left the view)

    def line(self) -> str:
        versions = ", ".join(f"{n}@{v}" for n, v in self.inputs.items())
        failed = [
            f"{o.table}.{o.name} {o.failed} of {o.checked} failed ({o.on_violation})"
            for o in self.expectations
            if o.failed
        ]
        note = "; ".join(n for n in (self.note, "expectations: " + ", ".join(failed) if failed else "") if n)
        note = f"  ({note})" if note else ""
        work = "recomputed" if self.rows_in is None else f"{self.rows_in} changes in"
        work += f", {self.rows_read} input rows read" if self.rows_read else ""
        work += f", {self.expired} key{'s' if self.expired != 1 else ''} expired" if self.expired else ""
        where = " on the driver" if self.engine == "driver" else ""
        return (
            f"{self.view}: batch {self.batch_id} [{self.kind}] inputs {versions}: {work}, "
            f"{self.rows_out} changelog rows out, {self.millis} ms{where}{note}"
        )

    def profile(self) -> str:
        """The batch's phases, one line: `mv refresh --profile` prints it under the batch line."""
        return "  phases: " + ", ".join(p.text() for p in self.phases)
