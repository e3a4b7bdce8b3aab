"""MilpSolver adapter over HiGHS (highspy): deterministic, single-threaded, time-limited."""

from __future__ import annotations

import highspy
import numpy as np

from scheduler.domain.milp import INF, Milp, MilpResult


class _QuietHighs(highspy.Highs):
    """``highspy.Highs`` that never prints HiGHS's banner: its constructor enables callbacks,
    which writes the log header unless ``output_flag`` is already off."""

    def enableCallbacks(self) -> None:
        self.setOptionValue("output_flag", False)
        super().enableCallbacks()  # type: ignore[no-untyped-call]


class HighsSolver:
    """Solve fleet-planning MILPs with HiGHS."""

    def solve(self, problem: Milp, time_limit_s: float) -> MilpResult | None:
        h = _QuietHighs()  # type: ignore[no-untyped-call]
        h.silent()
        h.setOptionValue("time_limit", max(0.05, float(time_limit_s)))
        h.setOptionValue("threads", 1)
        h.setOptionValue("random_seed", 0)
        h.setOptionValue("mip_rel_gap", 1e-6)
        inf = highspy.kHighsInf
        n = len(problem.cost)

        def bound(v: float) -> float:
            return inf if v == INF else (-inf if v == -INF else v)

        h.addVars(n, np.array([bound(v) for v in problem.lower]),
                  np.array([bound(v) for v in problem.upper]))
        h.changeColsCost(n, np.arange(n, dtype=np.int32), np.array(problem.cost))
        integral = [k for k, flag in enumerate(problem.integer) if flag]
        if integral:
            h.changeColsIntegrality(len(integral), np.array(integral, dtype=np.int32),
                                    np.array([highspy.HighsVarType.kInteger] * len(integral)))
        for coefficients, lo, hi in zip(problem.rows, problem.row_lower, problem.row_upper,
                                        strict=True):
            idx = sorted(coefficients)
            h.addRow(bound(lo), bound(hi), len(idx), np.array(idx, dtype=np.int32),
                     np.array([coefficients[k] for k in idx]))
        h.run()
        status = h.getModelStatus()
        optimal = status == highspy.HighsModelStatus.kOptimal
        if not optimal and h.getInfo().primal_solution_status != 2:  # 2 = feasible
            return None
        values = tuple(float(v) for v in h.getSolution().col_value)
        return MilpResult(values, optimal)
