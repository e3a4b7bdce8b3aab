"""A model a GPU budget or pool holds below the replicas it was sized for, as the tick says it
(pure values).

A budget is the operator's deliberate cap, so the fleet stays healthy under it; but a model
short of its demand must say why at every tick the cap binds, not only at the tick that changed
its replicas: a fleet that starts already at the budget never changes them, and a replica
change's reason is gone from view a tick later. So each such tick's record carries the note
(``headroom status`` shows it under the last tick) and the dashboard reads it back per model
(``from_note``), as a demand hint a budget capped is said (``hint_capacity.CappedHint``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from controlplane.domain.wording import counted

#: what the replicas were sized for: the model's demand (and replica bounds), or its pause
FOR_DEMAND = "its demand"
FOR_PAUSE = "its pause"

_NOTE = re.compile(r"model (?P<model>.+): (?P<sized>\d+) replicas sized for "
                   rf"(?P<sized_for>{FOR_DEMAND}|{FOR_PAUSE}), (?P<held>\d+) held: capped by "
                   r"(?P<limit>\S+?)(?: \((?P<gpus>[0-9.e+]+) GPUs?\))?")


@dataclass(frozen=True, slots=True)
class BudgetHold:
    """``model`` held at ``held`` hot replicas of the ``sized`` its demand (or pause) asked
    for, by ``limit`` (``tenant_gpu_budget:<tenant>``, ``pool_max_nodes:<pool>``,
    ``cluster_gpu_budget``); ``budget_gpus``: the budget's GPUs (None for a pool)."""

    model: str
    sized: int
    held: int
    limit: str
    budget_gpus: float | None = None
    sized_for: str = FOR_DEMAND

    def note(self) -> str:
        """The tick record's note (``headroom status`` shows it under the last tick)."""
        gpus = "" if self.budget_gpus is None else \
            f" ({self.budget_gpus:g} GPU{'' if self.budget_gpus == 1 else 's'})"
        return (f"model {self.model}: {self.sized} replicas sized for {self.sized_for}, "
                f"{self.held} held: capped by {self.limit}{gpus}")

    def reason(self) -> str:
        """One cell (the dashboard's replica reason): the limit, held of sized."""
        return f"{self.limit}: {self.held} of {counted(self.sized, 'replica')} held"

    @classmethod
    def from_note(cls, note: str) -> BudgetHold | None:
        """The hold a tick's ``note`` says (``note`` read back); None for any other note."""
        found = _NOTE.fullmatch(note)
        if found is None:
            return None
        gpus = found["gpus"]
        return cls(found["model"], int(found["sized"]), int(found["held"]), found["limit"],
                   None if gpus is None else float(gpus), found["sized_for"])


def holds_noted(notes: Iterable[str]) -> dict[str, BudgetHold]:
    """Model -> the hold a tick's ``notes`` say for it (models held by no budget: absent)."""
    return {hold.model: hold for note in notes if (hold := BudgetHold.from_note(note))}
