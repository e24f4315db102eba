"""Which version of a source or view to read: by number, as of a time, or as of a cut of source versions; and
the source versions a view version reflects through the views it reads (its lineage). delta-rs only, no Spark.

A view's snapshot commit records the version of each input it reflects (`mvengine.inputs`); an input that is
itself a view names that view's snapshot version, whose own commit names its inputs, and so on down to the
sources. Histories are read once per `Versions` and cached: make a new one to see newer commits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from mvengine.config import Config
from mvengine.errors import MvError
from mvengine.project.catalog import Catalog
from mvengine.project.layout import CommitRecord, snapshot_commits, source_table, view_tables
from mvengine.storage.tables import TableRef, commit_history, parse_timestamp


@dataclass(frozen=True)
class Commit:
    version: int
    timestamp_ms: int

    @property
    def time(self) -> datetime:
        return datetime.fromtimestamp(self.timestamp_ms / 1000, tz=UTC)


def show_time(value: datetime | int) -> str:
    """A time as mvengine prints it: '2026-11-21 12:03:00', with milliseconds or microseconds when there are
    any. Epoch milliseconds and times with a zone are shown in UTC; naive times as they are."""
    if isinstance(value, int):
        value = datetime.fromtimestamp(value / 1000, tz=UTC)
    if value.tzinfo is not None:
        value = value.astimezone(UTC)
    text = value.strftime("%Y-%m-%d %H:%M:%S")
    micros = value.microsecond
    return text + ("" if not micros else f".{micros // 1000:03d}" if micros % 1000 == 0 else f".{micros:06d}")


@dataclass
class Versions:
    config: Config
    catalog: Catalog
    _commits: dict[str, list[Commit]] = field(default_factory=dict, init=False)
    _snapshots: dict[str, dict[int, CommitRecord]] = field(default_factory=dict, init=False)

    # -- names and tables -----------------------------------------------------------------------------------

    def name(self, name: str) -> str:
        """The declared spelling of a source or view (an error with a suggestion for an unknown one)."""
        return self.catalog.require([name])[0]

    def is_view(self, name: str) -> bool:
        return name in self.catalog.plans

    def view(self, name: str) -> str:
        name = self.name(name)
        if not self.is_view(name):
            raise MvError(
                f"{name} is a source, not a view: it has no changelog or refresh history of mvengine's",
                hint=f'read the source with mv query "SELECT * FROM {name}"',
            )
        return name

    def table(self, name: str) -> TableRef:
        """A source's table, or a view's snapshot."""
        if self.is_view(name):
            return view_tables(self.catalog.plans[name], self.config.storage_options).snapshot
        return source_table(self.catalog.sources[name], self.config.storage_options)

    def changelog(self, view: str) -> TableRef:
        return view_tables(self.catalog.plans[view], self.config.storage_options).changelog

    # -- versions of one table ------------------------------------------------------------------------------

    def commits(self, name: str) -> list[Commit]:
        """Every version of a source's table or a view's snapshot still in its log, oldest first."""
        if name not in self._commits:
            ref = self.table(name)
            if not ref.exists():
                raise self._missing(name)
            entries = commit_history(ref.open())
            self._commits[name] = sorted(
                (Commit(int(h["version"]), int(h["timestamp"])) for h in entries), key=lambda c: c.version
            )
        return self._commits[name]

    def latest(self, name: str) -> int:
        return self.commits(name)[-1].version

    def check_version(self, name: str, version: int) -> int:
        commits = self.commits(name)
        if not commits[0].version <= version <= commits[-1].version:
            raise MvError(
                f"{self._kind(name)} {name} has no version {version}: its versions are "
                f"{commits[0].version}..{commits[-1].version}",
                hint=f"see them with mv history {name}" if self.is_view(name) else None,
            )
        return version

    def version_at(self, name: str, when: str | datetime) -> int:
        """The last version committed at or before `when` (naive times are UTC)."""
        moment = parse_timestamp(when) if isinstance(when, str) else _utc(when)
        millis = moment.timestamp() * 1000
        commits = self.commits(name)
        before = [c for c in commits if c.timestamp_ms <= millis]
        if not before:
            raise MvError(
                f"{self._kind(name)} {name} has no version as of {show_time(moment)}: its earliest "
                f"version ({commits[0].version}) was committed at {show_time(commits[0].time)}",
                hint=f"use a time at or after {show_time(commits[0].time)} (UTC)",
            )
        return before[-1].version

    def first_version_since(self, name: str, when: str | datetime) -> int:
        """The first version committed at or after `when` (one past the latest when there is none yet)."""
        moment = parse_timestamp(when) if isinstance(when, str) else _utc(when)
        millis = moment.timestamp() * 1000
        commits = self.commits(name)
        return next((c.version for c in commits if c.timestamp_ms >= millis), commits[-1].version + 1)

    # -- a view's snapshot commits and lineage --------------------------------------------------------------

    def snapshot_commits(self, view: str) -> dict[int, CommitRecord]:
        if view not in self._snapshots:
            commits = snapshot_commits(self.table(view))
            if not commits:
                raise self._missing(view)
            self._snapshots[view] = {c.version: c for c in commits}
        return self._snapshots[view]

    def snapshot_commit(self, view: str, version: int) -> CommitRecord:
        commits = self.snapshot_commits(view)
        if version not in commits:
            self.check_version(view, version)
            raise MvError(
                f"version {version} of view {view} is no longer in its Delta log (cleaned up by log "
                "retention)",
                hint="read a later version",
            )
        return commits[version]

    def source_versions(self, name: str, version: int) -> dict[str, list[int]]:
        """The versions of every source that `name` at `version` reflects, directly or through the views it
        reads. Usually one version per source; more than one when the inputs it read had reached different
        versions of the same source (an inconsistent cut)."""
        if not self.is_view(name):
            return {name: [version]}
        found: dict[str, set[int]] = {}
        for upstream, upstream_version in self.snapshot_commit(name, version).inputs.items():
            for source, versions in self.source_versions(upstream, upstream_version).items():
                found.setdefault(source, set()).update(versions)
        return {s: sorted(v) for s, v in sorted(found.items())}

    def as_of_sources(self, name: str, cut: dict[str, int]) -> int:
        """The latest version of `name` reflecting no source version newer than the `cut` gives it (a source
        read directly is read at its cut version; a source the view does not depend on does not restrict it)."""
        if not self.is_view(name):
            if name in cut:
                return self.check_version(name, cut[name])
            return self.latest(name)
        for version in sorted(self.snapshot_commits(name), reverse=True):
            reflects = self.source_versions(name, version)
            if all(max(v) <= cut[s] for s, v in reflects.items() if s in cut):
                return version
        limits = ", ".join(f"{s}={v}" for s, v in cut.items())
        raise MvError(
            f"view {name} has no version that reflects only {limits} or earlier: its earliest "
            f"version in the log already reflects {self._show_sources(name)}",
            hint="pick a later source version (mv describe VIEW --json shows source_versions)",
        )

    def _show_sources(self, view: str) -> str:
        first = min(self.snapshot_commits(view))
        return ", ".join(f"{s}@{'/'.join(map(str, v))}" for s, v in self.source_versions(view, first).items())

    # -- errors ---------------------------------------------------------------------------------------------

    def _kind(self, name: str) -> str:
        return "view" if self.is_view(name) else "source"

    def _missing(self, name: str) -> MvError:
        if self.is_view(name):
            return MvError(
                f"view {name} has not been refreshed yet, so it has no versions to read",
                hint=f"run mv refresh {name}",
            )
        return MvError(
            f"source {name} has no table yet at {self.table(name).uri}",
            hint="create it with mv sources --create (or mv refresh, which creates missing sources)",
        )


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)
