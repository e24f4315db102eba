"""`mv demo` in a Nexmark project (examples/nexmark): Nexmark's event stream, written into its sources.

As Nexmark's generator shapes it: events are numbered; of every 50, 1 is a new person, 3 are new auctions and 46
are bids. Auctions are put up by recent people, bids go to recent auctions and come from recent people, half of
them to a few hot auctions and from a few hot bidders (every 100th id). Event times advance with the event
number at `rate` events per second, from the time the feed starts; prices are spread over six orders of
magnitude (in cents), as Nexmark's are. The same seed writes the same events.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pyarrow as pa

from mvengine.config import Config
from mvengine.errors import MvError
from mvengine.project.catalog import Catalog
from mvengine.project.layout import source_table
from mvengine.storage.sources import ensure_source_table

SOURCES = {
    "person": ["id", "name", "email_address", "credit_card", "city", "state", "date_time", "extra"],
    "auction": [
        "id",
        "item_name",
        "description",
        "initial_bid",
        "reserve",
        "date_time",
        "expires",
        "seller",
        "category",
        "extra",
    ],
    "bid": ["auction", "bidder", "price", "channel", "url", "date_time", "extra"],
}
FIRST_NAMES = ["Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"]
LAST_NAMES = ["Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"]
CITIES = [
    "Phoenix",
    "Los Angeles",
    "San Francisco",
    "Boise",
    "Portland",
    "Bend",
    "Redmond",
    "Seattle",
    "Kent",
    "Cheyenne",
]
STATES = ["AZ", "CA", "ID", "OR", "WA", "WY"]
CHANNELS = ["apple", "google", "facebook", "baidu", "amazon", "alibaba"]
FIRST_ID = 1000
HOT = 100  # every 100th auction and person is hot
IN_FLIGHT = 100  # bids go to one of the last 100 auctions, from one of the last 100 people


def side_input_rows() -> list[dict]:
    """q13's side input: a value for every 7th key below 10,000."""
    return [{"key": k, "value": f"side-{k}"} for k in range(0, 10_000, 7)]


def is_nexmark(catalog: Catalog) -> bool:
    return all(name in catalog.sources for name in SOURCES)


class NexmarkFeed:
    """Writes `rate` events per second of event time, a batch each `interval` seconds."""

    def __init__(
        self,
        config: Config,
        catalog: Catalog,
        *,
        seed: int | None = None,
        interval: float = 1.0,
        rate: int = 1000,
    ) -> None:
        for name, columns in SOURCES.items():
            found = [c.lower() for c in catalog.sources[name].schema.names]
            if found != columns:
                raise MvError(
                    f"source {name} has the columns {', '.join(found)}, not Nexmark's ({', '.join(columns)})",
                    hint="keep examples/nexmark/views/sources.sql as it is",
                )
        self.sources = {name: catalog.sources[name] for name in SOURCES}
        self.side_input = catalog.sources.get("side_input")
        self.options = config.storage_options
        self.random = random.Random(seed)
        self.interval, self.rate = interval, rate
        self.started = datetime.now(UTC).replace(microsecond=0)
        self.events = 0  # events written so far: the next event's number
        self.first = 0  # the first event this feed writes (a feed goes on where the last one stopped)
        self.batches = 0

    def start(self) -> str | None:
        """Create the sources when missing, go on numbering after the events they hold, and fill the side input
        once (returns a line saying so)."""
        for source in self.sources.values():
            ref = source_table(source, self.options)
            ensure_source_table(ref, source.schema)
            self.events += ref.open().count()
        self.first = self.events
        if self.side_input is None:
            return None
        ref = source_table(self.side_input, self.options)
        ensure_source_table(ref, self.side_input.schema)
        if ref.open().version() > 0:
            return None
        rows = side_input_rows()
        self._write("side_input", pa.Table.from_pylist(rows, schema=self.side_input.schema))
        return f"side_input: {len(rows)} rows"

    def next_batch(self) -> str:
        """One batch: the events of the next `interval` seconds of event time."""
        tables = self.next_tables()
        for name, table in tables.items():
            if table.num_rows:
                self._write(name, table)
        return (
            f"nexmark batch {self.batches}: {tables['person'].num_rows} people, "
            f"{tables['auction'].num_rows} auctions, {tables['bid'].num_rows} bids"
        )

    def next_tables(self) -> dict[str, pa.Table]:
        """The next batch's events of each stream, not written (benchmarks/peers/ writes them for Flink too)."""
        self.batches += 1
        count = max(1, round(self.rate * self.interval))
        rows: dict[str, list[dict]] = {name: [] for name in SOURCES}
        for n in range(self.events, self.events + count):
            kind, event = self._event(n)
            rows[kind].append(event)
        self.events += count
        return {
            name: pa.Table.from_pylist(batch, schema=self.sources[name].schema)
            for name, batch in rows.items()
        }

    # -- events -------------------------------------------------------------------------------------------------

    def _event(self, n: int) -> tuple[str, dict]:
        at = self.started + timedelta(microseconds=(n - self.first) * 1_000_000 // self.rate)
        slot = n % 50
        epoch = n // 50
        if slot == 0:
            return "person", self._person(FIRST_ID + epoch, at)
        if slot <= 3:
            return "auction", self._auction(FIRST_ID + epoch * 3 + slot - 1, epoch, at)
        return "bid", self._bid(epoch, at)

    def _person(self, pid: int, at: datetime) -> dict:
        pick = self.random
        first, last = pick.choice(FIRST_NAMES), pick.choice(LAST_NAMES)
        return {
            "id": pid,
            "name": f"{first} {last}",
            "email_address": f"{first}.{last}@example.com".lower(),
            "credit_card": " ".join(f"{pick.randrange(10_000):04d}" for _ in range(4)),
            "city": pick.choice(CITIES),
            "state": pick.choice(STATES),
            "date_time": at,
            "extra": self._extra(),
        }

    def _auction(self, aid: int, epoch: int, at: datetime) -> dict:
        pick = self.random
        initial = self._price()
        return {
            "id": aid,
            "item_name": f"item-{aid}",
            "description": f"the item {aid}",
            "initial_bid": initial,
            "reserve": initial + self._price(),
            "date_time": at,
            "expires": at + timedelta(seconds=pick.uniform(2, 20)),
            "seller": self._recent_person(epoch),
            "category": 10 + pick.randrange(5),
            "extra": self._extra(),
        }

    def _bid(self, epoch: int, at: datetime) -> dict:
        pick = self.random
        last_auction = FIRST_ID + epoch * 3 + 2
        if pick.random() < 0.5:
            auction = max(FIRST_ID, (last_auction // HOT) * HOT)
        else:
            auction = max(FIRST_ID, last_auction - pick.randrange(IN_FLIGHT))
        channel = pick.choice(CHANNELS)
        url = f"https://www.nexmark.com/{self._word()}/{self._word()}/{self._word()}/item.htm?query=1" + (
            f"&channel_id={pick.randrange(1000)}" if pick.random() < 0.9 else ""
        )
        return {
            "auction": auction,
            "bidder": self._recent_person(epoch),
            "price": self._price(),
            "channel": channel,
            "url": url,
            "date_time": at,
            "extra": self._extra(),
        }

    def _recent_person(self, epoch: int) -> int:
        last = FIRST_ID + epoch
        if self.random.random() < 0.5:
            return max(FIRST_ID, (last // HOT) * HOT)
        return max(FIRST_ID, last - self.random.randrange(IN_FLIGHT))

    def _price(self) -> int:
        return int(10 ** (self.random.random() * 6) * 100)

    def _word(self) -> str:
        return "".join(self.random.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(5))

    def _extra(self) -> str:
        return "".join(self.random.choice("abc ") for _ in range(self.random.randrange(4, 12)))

    def _write(self, name: str, table: pa.Table) -> None:
        from deltalake import write_deltalake

        source = self.sources.get(name) or self.side_input
        assert source is not None, name  # a table the feed writes
        ref = source_table(source, self.options)
        write_deltalake(
            ref.uri,
            table,
            mode="append",
            storage_options=self.options or None,
        )
        ref.committed()
