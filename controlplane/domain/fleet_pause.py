"""The whole fleet paused (``headroom fleet pause``, pure values): every reconcile tick still
observes, forecasts, sizes and plans, and records its plan as a dry run, but changes nothing
(no replica, node pool, device-plugin config or new MIG re-layout; one in flight is carried to
its end, as stopped halfway it would hold its node cordoned) until ``headroom fleet resume``:
an operator's hands-off switch during an incident, without a restart of serve."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from controlplane.domain.pause import since_by

FLEET_PAUSED = "fleet_paused"  # a paused tick's reason starts with it
#: the ``why`` an operator may give, at most (the store's column)
WHY_CHARS = 500
#: a tick record's reason, at most (``ticks.reason``)
TICK_REASON_CHARS = 200


@dataclass(frozen=True, slots=True)
class FleetPause:
    paused_at: datetime
    paused_by: str = ""  # the CLI user's login name ("" when it has none)
    why: str = ""  # what the operator said (``--reason``)

    def since(self) -> str:
        """``since <UTC time>[ by <who>]``, as a model's pause says it."""
        return since_by(self.paused_at, self.paused_by)

    def tick_reason(self) -> str:
        """A paused tick's reason: ``fleet_paused since <time> by <who>[: <why>]``, cut to
        the tick record's column."""
        reason = f"{FLEET_PAUSED} {self.since()}" + (f": {self.why}" if self.why else "")
        return reason if len(reason) <= TICK_REASON_CHARS else \
            reason[:TICK_REASON_CHARS - 3] + "..."

    def line(self) -> str:
        """For an operator: since when and why the fleet is paused, what that does, how it
        ends."""
        return f"the fleet is paused {self.since()}{self.said()}: {EFFECT}"

    def said(self) -> str:
        """`` (<why>)``, or "" when the operator gave no reason."""
        return f" ({self.why})" if self.why else ""


#: what a pause does, and how it ends
EFFECT = ("each tick plans and records a dry run and changes nothing until "
          "`headroom fleet resume`")


@dataclass(frozen=True, slots=True)
class FleetPauseSet:
    """What ``headroom fleet pause`` left: the pause in force and the one already in force
    (None: the fleet was not paused). A repeated pause keeps its start and who paused it; a
    reason given replaces the one it had."""

    pause: FleetPause
    earlier: FleetPause | None = None

    def line(self) -> str:
        if self.earlier is None:
            return f"paused the fleet{self.pause.said()}: {EFFECT}"
        return f"the fleet was already paused {self.pause.since()}{self.pause.said()}: {EFFECT}"
