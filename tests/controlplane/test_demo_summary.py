"""The line `headroom demo` ends with: its counts read as counts of one or of several."""

from __future__ import annotations

from dataclasses import replace

from controlplane.demo import DemoSummary

ONE_OF_EACH = DemoSummary(
    ticks=1, sim_minutes=1.0, sim_start_at="2026-12-03T08:00:00Z", models=1, gpus=1,
    gpus_peak=1, placements=1, forecasts=1, served_share=1.0, short_model_minutes_pct=0.0,
    gpu_hours=0.02, cost_usd=0.05, mig_relayouts=1, wall_s=1.0, grpc_address="127.0.0.1:1",
    dashboard_url=None, db_url="sqlite:///demo.db")


def test_a_summary_of_one_of_each_reads_in_the_singular() -> None:
    assert ONE_OF_EACH.line() == (
        "stopped after 1 simulated minute: 1 tick, 1 placement, 1 GPU, served 100.00% of "
        "demand, 0.0 GPU-hours ($0), 1 MIG re-layout")


def test_a_summary_of_several_or_none_reads_in_the_plural() -> None:
    several = replace(ONE_OF_EACH, sim_minutes=120.0, ticks=240, placements=1200, gpus=24,
                      served_share=0.99614, gpu_hours=41.25, cost_usd=2345.6, mig_relayouts=0)
    assert several.line() == (
        "stopped after 120 simulated minutes: 240 ticks, 1200 placements, 24 GPUs, served "
        "99.61% of demand, 41.2 GPU-hours ($2,346), 0 MIG re-layouts")


def test_minutes_are_counted_as_they_are_shown_rounded() -> None:
    assert replace(ONE_OF_EACH, sim_minutes=0.6).line().startswith(
        "stopped after 1 simulated minute:")
    assert replace(ONE_OF_EACH, sim_minutes=1.5).line().startswith(
        "stopped after 2 simulated minutes:")
    assert replace(ONE_OF_EACH, sim_minutes=0.25).line().startswith(
        "stopped after 0 simulated minutes:")
