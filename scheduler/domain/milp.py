"""A small mixed-integer linear program as plain data, and the port that solves it.

The fleet planner builds a ``Milp``; a ``MilpSolver`` adapter (HiGHS in ``scheduler.highs``)
solves it. Keeping the solver behind a port keeps the planner pure and testable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

INF = float("inf")


@dataclass(slots=True)
class Milp:
    """minimise cost . x  s.t.  row_lower <= A x <= row_upper,  lower <= x <= upper."""

    cost: list[float] = field(default_factory=list)
    lower: list[float] = field(default_factory=list)
    upper: list[float] = field(default_factory=list)
    integer: list[bool] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    rows: list[dict[int, float]] = field(default_factory=list)
    row_lower: list[float] = field(default_factory=list)
    row_upper: list[float] = field(default_factory=list)

    def var(self, name: str, cost: float, lower: float = 0.0, upper: float = INF,
            integer: bool = True) -> int:
        self.cost.append(cost)
        self.lower.append(lower)
        self.upper.append(upper)
        self.integer.append(integer)
        self.names.append(name)
        return len(self.cost) - 1

    def row(self, coefficients: dict[int, float], lower: float = -INF,
            upper: float = INF) -> None:
        self.rows.append({k: v for k, v in coefficients.items() if v != 0.0})
        self.row_lower.append(lower)
        self.row_upper.append(upper)


@dataclass(frozen=True, slots=True)
class MilpResult:
    values: tuple[float, ...]
    optimal: bool  # False: the best feasible solution found within the time limit


class MilpSolver(Protocol):
    """Solves a Milp; returns None when no feasible solution was found in ``time_limit_s``."""

    def solve(self, problem: Milp, time_limit_s: float) -> MilpResult | None: ...
