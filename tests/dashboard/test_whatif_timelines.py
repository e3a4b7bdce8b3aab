"""What-if: reading `headroom simulate` timelines and comparing policies."""

from __future__ import annotations

from pathlib import Path

import pytest
from dashboard_support import APP, write_timeline
from streamlit.testing.v1 import AppTest

from dashboard import whatif


def test_a_policy_short_after_a_demand_step_counts_short_minutes_and_dollars(
        tmp_path: Path) -> None:
    # chat: 3 replicas x 40 rps = 120 rps; demand 100 for 10 min, then 200 for 20 min -> short
    path = write_timeline(tmp_path / "reactive.csv", minutes=30, replicas=3, gpus_billed=4)
    (label, frame), = whatif.read_timelines(path.read_bytes(), path.name).items()
    outcome = whatif.summarize(label, frame, usd_per_gpu_hour=5.0)
    assert label == "reactive"
    assert outcome.short_minutes == 20
    assert outcome.short_model_minutes == 20
    assert outcome.model_minutes == 60
    assert outcome.billing == "fleet"
    assert outcome.gpu_hours == pytest.approx(30 * 4 / 60)
    assert outcome.usd == pytest.approx(10.0)
    assert outcome.shortfall_requests == pytest.approx(20 * 80 * 60)


def test_a_policy_column_splits_one_file_into_policies(tmp_path: Path) -> None:
    text = ("policy,minute,model,demand_rps,ready_replicas,per_replica_rps,gpus_billed\n"
            "static,0,m,10,1,20,2\nstatic,1,m,10,1,20,2\npredictive,0,m,10,1,20,1\n")
    timelines = whatif.read_timelines(text.encode(), "both.csv")
    assert sorted(timelines) == ["predictive", "static"]
    assert whatif.summarize("static", timelines["static"], 1.0).gpu_hours == pytest.approx(4 / 60)


def test_values_that_differ_within_a_minute_are_summed_per_model(tmp_path: Path) -> None:
    text = ("minute,model,demand_rps,ready_replicas,per_replica_rps,gpus_billed\n"
            "0,a,1,1,1,2\n0,b,1,1,1,3\n")
    frame = whatif.read_timelines(text.encode(), "x.csv")["x"]
    assert whatif.summarize("x", frame, 1.0).gpu_hours == pytest.approx(5 / 60)


def test_each_products_gpu_hours_are_priced_at_its_own_price_when_the_timeline_names_them(
        ) -> None:
    text = ("minute,model,demand_rps,ready_replicas,per_replica_rps,gpus_billed,gpu_product,"
            "product_gpus_billed\n"
            "0,a,1,1,1,10,A100-80GB,8\n0,b,1,1,1,10,L4,2\n0,c,1,1,1,10,L4,2\n"
            "1,a,1,1,1,12,A100-80GB,8\n1,b,1,1,1,12,L4,4\n1,c,1,1,1,12,L4,4\n")
    frame = whatif.read_timelines(text.encode(), "mixed.csv")["mixed"]
    outcome = whatif.summarize("mixed", frame, 100.0, {"A100-80GB": 5.0, "L4": 1.0})
    assert dict(outcome.gpu_hours_by_product) == pytest.approx({"A100-80GB": 16 / 60,
                                                                "L4": 6 / 60})
    assert outcome.usd == pytest.approx((16 * 5.0 + 6 * 1.0) / 60)
    assert outcome.gpu_hours == pytest.approx(22 / 60)
    assert outcome.priced == "per product"
    assert whatif.summarize("mixed", frame, 2.0).usd == pytest.approx(22 / 60 * 2.0)
    with pytest.raises(whatif.TimelineError,
                       match=r"^policy mixed: no price for GPU product 'L4'$"):
        whatif.summarize("mixed", frame, 1.0, {"A100-80GB": 5.0})


def test_timestamps_in_the_minute_column_are_read_as_minutes() -> None:
    text = ("minute,model,demand_rps,ready_replicas,per_replica_rps,gpus_billed\n"
            "2026-03-02T00:00:00Z,a,1,1,1,1\n2026-03-02T00:01:00Z,a,1,1,1,1\n")
    frame = whatif.read_timelines(text.encode(), "t.csv")["t"]
    assert list(frame["minute"].diff().dropna()) == [1]


def test_the_per_minute_chart_of_a_timestamped_timeline_is_dated_at_its_own_times() -> None:
    text = ("minute,model,demand_rps,ready_replicas,per_replica_rps,gpus_billed\n"
            "2026-12-01 00:00:00,a,1,1,1,3\n2026-12-01 00:01:00,a,1,1,1,4\n")
    series = whatif.minute_series("t", whatif.read_timelines(text.encode(), "t.csv")["t"])
    assert [str(t) for t in series[whatif.MINUTE_AT]] == [
        "2026-12-01 00:00:00+00:00", "2026-12-01 00:01:00+00:00"]
    assert list(series["gpus_billed"]) == [3, 4]


def test_a_timeline_numbered_in_minutes_keeps_its_numbers_on_the_chart() -> None:
    text = ("minute,model,demand_rps,ready_replicas,per_replica_rps,gpus_billed\n"
            "0,a,1,1,1,3\n1,a,1,1,1,4\n")
    series = whatif.minute_series("t", whatif.read_timelines(text.encode(), "t.csv")["t"])
    assert whatif.MINUTE_AT not in series.columns
    assert list(series["minute"]) == [0, 1]


@pytest.mark.parametrize(("text", "message"), [
    ("minute,model,demand_rps\n0,a,1\n", r"bad\.csv: missing column\(s\) ready_replicas"),
    ("minute,model,demand_rps,ready_replicas,per_replica_rps,gpus_billed\n0,a,1,1,1,1\n"
     "1,a,-3,1,1,1\n", r"bad\.csv: line 3: demand_rps must be a finite number >= 0"),
    ("minute,model,demand_rps,ready_replicas,per_replica_rps,gpus_billed\n0,,1,1,1,1\n",
     r"bad\.csv: line 2: empty model"),
    ("minute,model,demand_rps,ready_replicas,per_replica_rps,gpus_billed\n0,a,1,1,1,1\n"
     "0,a,1,1,1,1\n", r"bad\.csv: line 3: a second row"),
    ("minute,model,demand_rps,ready_replicas,per_replica_rps,gpus_billed\n0.5,a,1,1,1,1\n",
     r"bad\.csv: line 2: minute"),
    ("minute,model,demand_rps,ready_replicas,per_replica_rps,gpus_billed,gpu_product\n"
     "0,a,1,1,1,1,L4\n", r"bad\.csv: column gpu_product without product_gpus_billed"),
    ("minute,model,demand_rps,ready_replicas,per_replica_rps,gpus_billed,gpu_product,"
     "product_gpus_billed\n0,a,1,1,1,1,,1\n", r"bad\.csv: line 2: empty gpu_product"),
    ("minute,model,demand_rps,ready_replicas,per_replica_rps,gpus_billed,gpu_product,"
     "product_gpus_billed\n0,a,1,1,1,1,L4,x\n",
     r"bad\.csv: line 2: product_gpus_billed must be a finite number >= 0"),
], ids=["missing column", "negative demand", "empty model", "duplicate minute", "half minute",
        "product without its GPUs", "empty product", "product GPUs not a number"])
def test_bad_timelines_are_rejected_naming_file_line_and_column(text: str, message: str) -> None:
    with pytest.raises(whatif.TimelineError, match=message):
        whatif.read_timelines(text.encode(), "bad.csv")


def test_a_row_with_an_empty_policy_is_reported_by_line_not_dropped() -> None:
    text = ("policy,minute,model,demand_rps,ready_replicas,per_replica_rps,gpus_billed\n"
            "static,0,m,10,1,20,2\n,1,m,10,1,20,2\n")
    with pytest.raises(whatif.TimelineError, match=r"^both\.csv: line 3: empty policy$"):
        whatif.read_timelines(text.encode(), "both.csv")


def test_totals_too_large_to_add_up_are_an_error_naming_them_not_inf_dollars() -> None:
    text = ("minute,model,demand_rps,ready_replicas,per_replica_rps,gpus_billed\n"
            "0,a,1e308,1,1,1e308\n1,a,1e308,1,1,1e308\n")
    frame = whatif.read_timelines(text.encode(), "huge.csv")["huge"]
    with pytest.raises(whatif.TimelineError, match=r"^policy huge: GPU-hours, dollars, demand, "
                                                   r"shortfall too large to add up"):
        whatif.summarize("huge", frame, usd_per_gpu_hour=1.0)


def test_a_folder_with_a_comma_in_its_name_is_one_path_not_two(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "runs,2026"
    folder.mkdir()
    write_timeline(folder / "static.csv", minutes=30, replicas=6, gpus_billed=8)
    monkeypatch.setenv("HEADROOM_DB__URL", f"sqlite:///{tmp_path / 'none.db'}")
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page("views/whatif.py").run()
    at.text_area[0].set_value(f"{folder}\n").run()
    assert not at.exception, [e.value for e in at.exception]
    assert [e.value for e in at.error] == []
    assert at.dataframe[0].value["policy"].tolist() == ["static"]
