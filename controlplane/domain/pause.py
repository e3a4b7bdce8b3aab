"""A paused model (``headroom models pause``, KEDA's ``autoscaling.keda.sh/paused-replicas``):
its replicas are held, the autoscaler plans no change for it but reaching the held count (pure).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from controlplane.domain.hints import rps_text
from controlplane.domain.observed import ObservedState

PAUSED = "paused"
#: the most replicas a bound or a pause may name: far above any fleet, and within the store's
#: 32-bit integer columns (PostgreSQL refuses more as "integer out of range")
MAX_REPLICAS = 1_000_000


@dataclass(frozen=True, slots=True)
class ModelPause:
    model: str
    replicas: int | None  # held at this many; None: at the replicas observed each tick
    paused_at: datetime
    paused_by: str = ""

    def __post_init__(self) -> None:
        if self.replicas is not None and self.replicas < 0:
            raise ValueError(f"model {self.model!r}: paused replicas must be >= 0")

    def held_replicas(self, observed: ObservedState) -> int:
        """The replicas the pause holds: its own count, else the workload's replica target as
        observed (0 when no workload serves the model)."""
        if self.replicas is not None:
            return self.replicas
        seen = observed.model(self.model)
        return seen.replicas_target if seen is not None else 0

    def held_text(self) -> str:
        """What the pause holds, for a line: ``3 replica(s)`` or ``its current replicas``."""
        return ("its current replicas" if self.replicas is None
                else f"{self.replicas} replica(s)")

    def hint_warning(self) -> str:
        """A demand hint added on the paused model, for an operator (no ``warning:`` prefix):
        the hint is stored, but the pause wins until the model is resumed."""
        return (f"{self.model} is {self.reason()}, held at {self.held_text()}: the pause holds "
                f"until `headroom models resume {self.model}`; the loop sizes the model for the "
                "hint only then")

    def reason(self) -> str:
        """The replica target's reason: ``paused since <UTC time> by <who>``."""
        return f"{PAUSED} {since_by(self.paused_at, self.paused_by)}"


def since_by(paused_at: datetime, paused_by: str) -> str:
    """A pause's ``since <UTC time, whole seconds>[ by <who>]`` (no ``by`` for no one)."""
    at = paused_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"since {at}" + (f" by {paused_by}" if paused_by else "")


@dataclass(frozen=True, slots=True)
class PauseSet:
    """What ``headroom models pause`` left: the pause in force, and the one the model already
    had (None: it was not paused). A repeated pause keeps its start and who paused it; a count
    given again replaces the one held."""

    pause: ModelPause
    earlier: ModelPause | None = None

    def line(self) -> str:
        """What the CLI says it did."""
        name, now, was = self.pause.model, self.pause, self.earlier
        if was is None:
            return (f"paused model {name} at {now.held_text()}; `headroom models resume {name}` "
                    "lets it scale again")
        if was.replicas == now.replicas:
            return f"model {name} was already {was.reason()}, at {was.held_text()}: unchanged"
        return (f"model {name} was already {was.reason()}: now held at {now.held_text()} "
                f"instead of {was.held_text()}, still paused since then")


def held(pauses: Sequence[ModelPause], observed: ObservedState) -> dict[str, tuple[int, str]]:
    """Model -> (replicas held, the replica target's reason) of each paused model."""
    return {p.model: (p.held_replicas(observed), p.reason()) for p in pauses}


def paused_hint_notes(pauses: Sequence[ModelPause], observed: ObservedState,
                      hint_rps: Mapping[str, float]) -> tuple[str, ...]:
    """A tick's notes for the paused models a demand hint is in force on (``hint_rps``, by
    model): the tick holds them at their pause whatever the hint announces."""
    return tuple(f"demand hint on {p.model}: {rps_text(hint_rps[p.model])} rps announced, but "
                 f"the model is {p.reason()}, held at {p.held_replicas(observed)} replica(s) "
                 f"until `headroom models resume {p.model}`"
                 for p in pauses if hint_rps.get(p.model, 0.0) > 0)


def paused_since_wall_s(paused_at: datetime, store_now: datetime, wall_now: datetime) -> float:
    """When a pause began, in Unix seconds on the wall clock's scale: ``wall_now`` less its age
    on the store's clock (``store_now`` - ``paused_at``; a simulated fleet's clock can be days
    off the wall clock, so its ``paused_at`` is no wall time). On a store whose clock is the
    wall clock it is ``paused_at``, give or take the moments between ``store_now`` and
    ``wall_now``."""
    return (wall_now - (store_now - paused_at)).timestamp()
