"""`mv demo`: a live feed of changes into the example project's sources, so that `mv refresh --continuous` has
something to keep fresh and `mv changes VIEW --follow` something to show.

Modelled on seed 002's running example: users earn scores for their team. Each batch appends a few score events
to `user_scores` (event times near now, in shuffled order, some of them minutes late) and now and then changes
`users` (a user renamed: the old key deleted and the new one inserted in one commit; a user moving country) or
takes a score back; now and then a glitch trips the example's expectations (a score no game gives, a team in
capitals). `user_scores` is append-only, so a score is taken back as a compensating event (the same
name, team and event time with the negated score), as an append-only log corrects itself. With the same seed the
same changes come in the same order; event times are relative to when the demo starts.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa

from mvengine.config import Config
from mvengine.errors import MvError
from mvengine.project.catalog import Catalog
from mvengine.project.layout import source_table
from mvengine.storage.sources import ensure_source_table
from mvengine.storage.tables import TableRef

# name, team, country
ROSTER = [
    ("Julie", "red", "FR"),
    ("Frank", "blue", "DE"),
    ("Ana", "red", "ES"),
    ("Kenji", "green", "JP"),
    ("Maya", "blue", "US"),
    ("Omar", "green", "EG"),
    ("Lena", "red", "DE"),
    ("Tom", "blue", "GB"),
]
NICKNAMES = {
    "Julie": "Jules",
    "Frank": "Frankie",
    "Ana": "Anita",
    "Kenji": "Ken",
    "Maya": "May",
    "Omar": "Omi",
    "Lena": "Leni",
    "Tom": "Tommy",
}
COUNTRIES = ["FR", "DE", "ES", "JP", "US", "EG", "GB", "BR"]
COLUMNS = {"user_scores": ["name", "team", "score", "ts"], "users": ["name", "team", "country"]}


@dataclass
class DemoBatch:
    number: int
    scores: int = 0
    late: int = 0
    events: list[str] = field(default_factory=list)  # what else happened, in words

    def line(self) -> str:
        late = f" ({self.late} late)" if self.late else ""
        scores = [f"{self.scores} new scores{late}"] if self.number else []
        return f"demo batch {self.number}: " + "; ".join(scores + self.events)


class DemoFeed:
    def __init__(
        self, config: Config, catalog: Catalog, *, seed: int | None = None, interval: float = 1.0
    ) -> None:
        for name, columns in COLUMNS.items():
            source = catalog.sources.get(name)
            if source is None or [c.lower() for c in source.schema.names] != columns:
                raise MvError(
                    f"mv demo writes into the example project's sources, and this project has no source "
                    f"{name}({', '.join(columns)})",
                    hint="run it in mvengine's own folder (mv --project <mvengine clone> demo), or copy "
                    "its views/sources.sql into your project",
                )
        self.scores = catalog.sources["user_scores"]
        self.users = catalog.sources["users"]
        self.options = config.storage_options
        self.random = random.Random(seed)
        # The glitches that trip the example's expectations draw from a sequence of their own, so that a seed's
        # other changes stay what they were.
        self.glitches = random.Random(None if seed is None else seed + 1)
        self.interval = interval
        self.started = datetime.now(UTC).replace(microsecond=0)
        self.batches = 0
        self.roster: dict[str, tuple[str, str]] = {}  # name -> (team, country), as the users table has it
        self.sent: list[tuple[str, str, int, datetime]] = []  # scores that could still be taken back

    def start(self) -> DemoBatch | None:
        """Create the sources when missing and read who the users are; a users table without users gets the
        demo's roster first (returned as batch 0)."""
        for source in (self.scores, self.users):
            ensure_source_table(source_table(source, self.options), source.schema)
        users = source_table(self.users, self.options).open().to_pyarrow_table().to_pylist()
        self.roster = {u["name"]: (u["team"], u["country"]) for u in users}
        if self.roster:
            return None
        self.roster = {name: (team, country) for name, team, country in ROSTER}
        self._merge_users([{"name": n, "team": t, "country": c, "_delete": False} for n, t, c in ROSTER])
        return DemoBatch(0, events=[f"{len(ROSTER)} users joined"])

    def next_batch(self) -> DemoBatch:
        self.batches += 1
        batch = DemoBatch(self.batches)
        pick = self.random
        now = self.started + timedelta(seconds=self.batches * self.interval)
        rows: list[dict[str, Any]] = []
        for _ in range(pick.randint(2, 6)):
            name = pick.choice(sorted(self.roster))
            late = pick.random() < 0.2
            ts = now - (
                timedelta(seconds=pick.randint(60, 600)) if late else timedelta(seconds=pick.uniform(0, 3))
            )
            score = pick.choice([pick.randint(1, 30), pick.randint(1, 60), pick.randint(40, 100)])
            rows.append({"name": name, "team": self.roster[name][0], "score": score, "ts": ts})
            batch.late += late
        pick.shuffle(rows)  # arrival order is not event-time order
        if self.sent and pick.random() < 0.15:
            name, team, score, ts = self.sent.pop(pick.randrange(len(self.sent)))
            rows.append({"name": name, "team": team, "score": -score, "ts": ts})
            batch.events.append(f"{name}'s score of {score} taken back")
        self.sent += [(r["name"], r["team"], r["score"], r["ts"]) for r in rows if r["score"] > 0]
        batch.scores = sum(r["score"] > 0 for r in rows)
        rows += self._glitch(batch, now)
        self._append_scores(rows)
        changes = self._user_changes(batch)
        if changes:
            self._merge_users(changes)
        return batch

    def _glitch(self, batch: DemoBatch, now: datetime) -> list[dict]:
        """Now and then a score no game gives (the example's `plausible_score` quarantines it) or a team spelled
        in capitals (`known_team` warns about it, and the views count it as a team of its own)."""
        pick = self.glitches
        draw = pick.random()
        if draw >= 0.16:
            return []
        name = pick.choice(sorted(self.roster))
        team = self.roster[name][0]
        if draw < 0.08:
            score = pick.randint(1000, 5000)
            batch.events.append(f"a glitched score of {score} for {name}")
            return [{"name": name, "team": team, "score": score, "ts": now}]
        batch.events.append(f"a score for team {team.upper()}")
        return [{"name": name, "team": team.upper(), "score": pick.randint(1, 30), "ts": now}]

    def _user_changes(self, batch: DemoBatch) -> list[dict]:
        pick = self.random
        changes: list[dict[str, Any]] = []
        renamable = sorted(n for n in self.roster if n in NICKNAMES)
        if renamable and pick.random() < 0.08:
            old = pick.choice(renamable)
            new = NICKNAMES[old]
            team, country = self.roster.pop(old)
            self.roster[new] = (team, country)
            changes += [
                {"name": old, "team": None, "country": None, "_delete": True},
                {"name": new, "team": team, "country": country, "_delete": False},
            ]
            batch.events.append(f"{old} renamed to {new}")
        elif pick.random() < 0.1:
            name = pick.choice(sorted(self.roster))
            team, country = self.roster[name]
            moved = pick.choice([c for c in COUNTRIES if c != country])
            self.roster[name] = (team, moved)
            changes.append({"name": name, "team": team, "country": moved, "_delete": False})
            batch.events.append(f"{name} moved from {country} to {moved}")
        return changes

    def _append_scores(self, rows: list[dict]) -> None:
        from deltalake import write_deltalake

        ref = source_table(self.scores, self.options)
        write_deltalake(
            ref.uri,
            pa.Table.from_pylist(rows, schema=self.scores.schema),
            mode="append",
            storage_options=self.options or None,
        )
        ref.committed()

    def _merge_users(self, rows: list[dict]) -> None:
        """Deletes, updates and inserts of users by name, in one commit."""
        ref: TableRef = source_table(self.users, self.options)
        schema = self.users.schema.append(pa.field("_delete", pa.bool_()))
        values = {c: f"s.{c}" for c in COLUMNS["users"]}
        (
            ref.open()
            .merge(
                pa.Table.from_pylist(rows, schema=schema),
                "t.name = s.name",
                source_alias="s",
                target_alias="t",
            )
            .when_matched_delete(predicate="s._delete")
            .when_matched_update({c: v for c, v in values.items() if c != "name"}, predicate="NOT s._delete")
            .when_not_matched_insert(values, predicate="NOT s._delete")
            .execute()
        )
        ref.committed()


def run_demo(
    config: Config,
    catalog: Catalog,
    *,
    interval: float,
    duration: float,
    seed: int | None,
    report: Callable[[str], None],
    stopping: Callable[[], bool] = lambda: False,
    rate: int = 1000,
) -> int:
    """Write a batch every `interval` seconds for `duration` seconds; returns the number of batches written. In a
    Nexmark project (examples/nexmark), Nexmark's events at `rate` per second (mvengine/nexmark.py)."""
    from mvengine.nexmark import NexmarkFeed, is_nexmark

    first: str | None
    if is_nexmark(catalog):
        nexmark = NexmarkFeed(config, catalog, seed=seed, interval=interval, rate=rate)
        first = nexmark.start()
        feed: DemoFeed | NexmarkFeed = nexmark
    else:
        feed = DemoFeed(config, catalog, seed=seed, interval=interval)
        started = feed.start()
        first = started.line() if started is not None else None
    if first is not None:
        report(first)
    deadline = time.monotonic() + duration
    next_at = time.monotonic()
    while time.monotonic() < deadline and not stopping():
        batch = feed.next_batch()
        report(batch if isinstance(batch, str) else batch.line())
        next_at += interval
        while time.monotonic() < min(next_at, deadline) and not stopping():
            time.sleep(min(0.05, interval))
    return feed.batches
