"""Where a store stands against this Headroom's migrations (``headroom db current | history``):
read with Alembic's own API (``MigrationContext`` for the store's stamp, ``ScriptDirectory`` for
the migrations), never by hand over ``alembic_version``."""

from __future__ import annotations

from dataclasses import dataclass

from alembic.script import Script, ScriptDirectory
from sqlalchemy import Engine

from controlplane.domain.wording import counted
from controlplane.store.engine import knows, scripts, store_revision


@dataclass(frozen=True)
class Standing:
    """``stamped``: the store's revision (None: never migrated); ``head``: this Headroom's;
    ``behind``: migrations ``headroom db upgrade`` would apply, None when this Headroom does not
    know ``stamped`` (a newer Headroom migrated the store)."""

    stamped: str | None
    head: str
    behind: int | None

    @property
    def verdict(self) -> str:
        if self.behind is None:
            return (f"newer than this Headroom: revision {self.stamped!r} is none of its "
                    "migrations (a newer Headroom migrated the store); run that version, or its "
                    f"`headroom db downgrade {self.head}` first")
        if self.behind == 0:
            return "current"
        return (f"behind by {counted(self.behind, 'migration')}; `headroom db upgrade` "
                f"applies {'it' if self.behind == 1 else 'them'}")


def standing_of(known: ScriptDirectory, stamped: str | None) -> Standing:
    """How far ``stamped`` is from the head of ``known`` (migrations are one line, no branch)."""
    head = known.get_current_head()
    if head is None:  # pragma: no cover - Headroom ships its migrations
        raise ValueError("this Headroom has no migrations")
    if stamped is not None and not knows(known, stamped):
        return Standing(stamped, head, None)
    pending = list(known.iterate_revisions(head, stamped or "base"))
    return Standing(stamped, head, len(pending))


def store_standing(engine: Engine) -> Standing:
    """Where the store of ``engine`` stands; reads only."""
    return standing_of(scripts(), store_revision(engine))


def summary_of(script: Script) -> str:
    """The first paragraph of a migration's docstring on one line (empty without one): its
    first line alone stopped mid-sentence."""
    paragraph = (script.doc or "").strip().split("\n\n", 1)[0]
    return " ".join(line.strip() for line in paragraph.splitlines())


def history_lines(known: ScriptDirectory, stamped: str | None) -> list[str]:
    """One line per migration, newest first: ``REV  summary``, the store's marked ``<- store``
    (and a line of its own first when this Headroom does not know it)."""
    lines = []
    if stamped is not None and not knows(known, stamped):
        lines.append(f"{stamped}  (unknown to this Headroom: a newer one migrated the store)"
                     "  <- store")
    for script in known.walk_revisions():
        summary = summary_of(script)
        mark = "  <- store" if script.revision == stamped else ""
        lines.append(f"{script.revision}  {summary}{mark}")
    if stamped is None:
        lines.append("(store never migrated)  <- store")
    return lines
