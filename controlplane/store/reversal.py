"""What ``headroom db downgrade REVISION`` would undo, read before anything is undone: the
migrations it reverses (newest first, each named by its revision and the first line of its
docstring) and the tables and columns each one's downgrade drops, with the rows (a table) or the
non-null values (a column) the store holds there.

What a downgrade drops is not kept by hand beside each migration: the migrations themselves run
on a scratch SQLite file (upgraded to the store's revision, then reversed one migration at a
time), and the inspector's tables and columns are compared after each step. So the listing
cannot drift from the migrations. A table that loses one column and gains one in the same step
had it renamed (0006's ``latency_ms``, ``mean_latency_ms`` before): its values are kept."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from alembic.script import Script, ScriptDirectory
from alembic.script.revision import RevisionError
from alembic.util.exc import CommandError
from sqlalchemy import Engine, column, func, inspect, select, table
from sqlalchemy.exc import SQLAlchemyError

from controlplane.domain.errors import error_line
from controlplane.store.engine import (
    MigrationError,
    downgrade,
    knows,
    make_engine,
    scripts,
    shown_url,
    store_revision,
    upgrade,
)
from controlplane.store.revisions import summary_of

#: a schema as the inspector sees it: table -> its columns (``alembic_version`` left out)
Schema = Mapping[str, frozenset[str]]


@dataclass(frozen=True)
class Dropped:
    """A table (``column`` None) or a column a migration's downgrade drops, by its name in the
    store; ``held``: its rows or non-null values there, None when they could not be counted."""

    table: str
    column: str | None
    held: int | None

    @property
    def name(self) -> str:
        return self.table if self.column is None else f"{self.table}.{self.column}"

    @property
    def holds_data(self) -> bool:
        """Whether dropping it loses something (uncounted: assume so)."""
        return self.held is None or self.held > 0


@dataclass(frozen=True)
class Reversal:
    """One migration a downgrade reverses and what its downgrade drops."""

    revision: str
    summary: str
    dropped: tuple[Dropped, ...]


@dataclass(frozen=True)
class DowngradePlan:
    """``stamped``: the store's revision; ``target``: the one resolved from what was asked (None:
    base); ``reversals``: newest first, empty when there is nothing to reverse."""

    stamped: str | None
    target: str | None
    reversals: tuple[Reversal, ...]

    @property
    def losses(self) -> tuple[Dropped, ...]:
        return tuple(d for r in self.reversals for d in r.dropped if d.holds_data)


@dataclass(frozen=True)
class StepChange:
    """What one downgrade step did to the schema: tables and columns it dropped, and columns
    it renamed (table, old name, new name)."""

    tables: tuple[str, ...]
    columns: tuple[tuple[str, str], ...]
    renamed: tuple[tuple[str, str, str], ...]


def step_change(before: Schema, after: Schema) -> StepChange:
    """The tables and columns ``before`` has and ``after`` lacks; one column lost and one
    gained in the same table is a rename."""
    columns: list[tuple[str, str]] = []
    renamed: list[tuple[str, str, str]] = []
    for name in sorted(before.keys() & after.keys()):
        lost, gained = before[name] - after[name], after[name] - before[name]
        if len(lost) == len(gained) == 1:
            renamed.append((name, next(iter(lost)), next(iter(gained))))
        else:
            columns.extend((name, lost_column) for lost_column in sorted(lost))
    return StepChange(tuple(sorted(before.keys() - after.keys())), tuple(columns),
                      tuple(renamed))


def schema_of(engine: Engine) -> dict[str, frozenset[str]]:
    inspector = inspect(engine)
    return {name: frozenset(c["name"] for c in inspector.get_columns(name))
            for name in inspector.get_table_names() if name != "alembic_version"}


def rehearsed_changes(stamped: str, steps: int) -> list[StepChange]:
    """The schema changes of the ``steps`` migrations below ``stamped`` (newest first), by
    running them on a scratch SQLite file."""
    with tempfile.TemporaryDirectory(prefix="headroom-downgrade-") as scratch_dir:
        engine = make_engine(f"sqlite:///{Path(scratch_dir) / 'scratch.db'}")
        try:
            upgrade(engine, stamped)
            changes, before = [], schema_of(engine)
            for _ in range(steps):
                downgrade(engine, "-1")
                after = schema_of(engine)
                changes.append(step_change(before, after))
                before = after
            return changes
        finally:
            engine.dispose()


def _held(engine: Engine, table_name: str, column_name: str | None) -> int | None:
    counted = func.count() if column_name is None else func.count(column(column_name))
    try:
        with engine.connect() as connection:
            return int(connection.execute(select(counted).select_from(table(table_name)))
                       .scalar_one())
    except SQLAlchemyError:
        return None


def resolve_target(known: ScriptDirectory, stamped: str, revision: str) -> str | None:
    """The revision id ``revision`` names (None: base); ``-N``: N migrations below ``stamped``,
    as Alembic reads it. CommandError / RevisionError when it names none."""
    relative = re.fullmatch(r"-(\d+)", revision)
    if relative is None:
        script = known.get_revision(revision)
        return None if script is None else script.revision
    at: str | None = stamped
    for _ in range(int(relative.group(1))):
        if at is None:
            raise CommandError(f"the store has only the migrations up to {stamped} to reverse")
        down = known.get_revision(at)
        if down is None or not (down.down_revision is None or
                                isinstance(down.down_revision, str)):
            raise CommandError(f"revision {at} has no single revision below it")
        at = down.down_revision
    return at


def downgrade_plan(engine: Engine, revision: str) -> DowngradePlan:
    """What ``downgrade(engine, revision)`` would reverse and drop; reads only. MigrationError
    naming the store when ``revision`` names no migration, or one above the store's. A store
    never migrated, or migrated by a newer Headroom, has nothing listed (the downgrade itself
    then says what it can)."""
    known, stamped = scripts(), store_revision(engine)
    if stamped is None or not knows(known, stamped):
        return DowngradePlan(stamped, None, ())
    try:
        target = resolve_target(known, stamped, revision)
        reversed_scripts: list[Script] = list(known.iterate_revisions(stamped, target or "base"))
    except (CommandError, RevisionError) as error:
        line = error_line(error)
        if "is not an ancestor of" in line:
            line = (f"the store is at revision {stamped!r}, below it; `headroom db upgrade "
                    f"{revision}` goes forward")
        raise MigrationError(f"database {shown_url(engine)}: cannot downgrade to "
                             f"{revision!r}: {line}") from None
    changes = rehearsed_changes(stamped, len(reversed_scripts)) if reversed_scripts else []
    names: dict[tuple[str, str], str] = {}  # (table, name at a step) -> its name in the store
    reversals = []
    for script, change in zip(reversed_scripts, changes, strict=True):
        for table_name, old, new in change.renamed:
            names[(table_name, new)] = names.pop((table_name, old), old)
        in_store = [(t, names.get((t, c), c)) for t, c in change.columns]
        dropped = [Dropped(t, c, _held(engine, t, c)) for t, c in in_store]
        dropped += [Dropped(t, None, _held(engine, t, None)) for t in change.tables]
        reversals.append(Reversal(script.revision, summary_of(script), tuple(dropped)))
    return DowngradePlan(stamped, target, tuple(reversals))
