"""The checks a process runs on its settings once it knows its models (``controlplane.runtime``):
a name of the settings that matches no model is refused, naming the setting."""

from __future__ import annotations

import pytest

from controlplane.reconcile_config import check_static_peaks
from controlplane.settings import AutoscalingSettings, ConfigError
from controlplane.sim.catalog import DEMO_MODELS

MODELS = "'bert-embed', 'llama-3-70b', 'llama-3-8b-chat', 'mistral-7b-support', " \
         "'resnet50-vision', 'whisper-asr'"
PEAKS = {m.name: 10.0 for m in DEMO_MODELS}


def test_a_static_peak_for_no_model_is_refused_with_the_model_it_is_close_to() -> None:
    auto = AutoscalingSettings(policy="static", static_peak_rps={**PEAKS, "bert-embedd": 600})
    with pytest.raises(ConfigError) as caught:
        check_static_peaks(auto, DEMO_MODELS)
    assert str(caught.value) == ("autoscaling.static_peak_rps: no model named 'bert-embedd' "
                                 f"(did you mean 'bert-embed'?); the models are {MODELS}")


def test_a_static_peak_for_no_model_is_refused_whatever_the_policy() -> None:
    auto = AutoscalingSettings(static_peak_rps={"zzz": 1.0})
    with pytest.raises(ConfigError) as caught:
        check_static_peaks(auto, DEMO_MODELS)
    assert str(caught.value) == ("autoscaling.static_peak_rps: no model named 'zzz'; the models "
                                 f"are {MODELS}")


def test_the_static_policy_is_refused_while_a_model_has_no_peak() -> None:
    auto = AutoscalingSettings(policy="static", static_peak_rps={"bert-embed": 600.0})
    with pytest.raises(ConfigError) as caught:
        check_static_peaks(auto, DEMO_MODELS)
    assert str(caught.value) == (
        "autoscaling.static_peak_rps: policy static needs the peak rps of every model; none for "
        "'llama-3-70b', 'llama-3-8b-chat', 'mistral-7b-support', 'resnet50-vision', "
        "'whisper-asr'")


def test_peaks_of_every_model_pass_and_other_policies_need_none() -> None:
    check_static_peaks(AutoscalingSettings(policy="static", static_peak_rps=PEAKS), DEMO_MODELS)
    check_static_peaks(AutoscalingSettings(), DEMO_MODELS)
