"""deploy/prometheus: the alerting rules pass ``promtool check rules``, their unit tests
(``promtool test rules``: each alert fires on the series that should raise it, not on a healthy
fleet's) pass, and every metric they name is one Headroom exposes."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import yaml
from prometheus_client import CollectorRegistry

from controlplane.metrics import ControlPlaneMetrics
from scheduler.metrics import PlacementMetrics

RULES_DIR = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
RULES = RULES_DIR / "headroom-alerts.yml"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PROMTOOL, *args], cwd=RULES_DIR, capture_output=True, text=True,
                          timeout=120, check=False)


def test_the_alerting_rules_are_valid_prometheus_rules() -> None:
    checked = _promtool("check", "rules", RULES.name)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 10 rules found" in checked.stdout


def test_each_alert_fires_on_its_symptom_and_none_on_a_healthy_fleet() -> None:
    tested = _promtool("test", "rules", "headroom-alerts.test.yml")
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def test_every_metric_the_rules_name_is_one_headroom_exposes() -> None:
    registry = CollectorRegistry()
    ControlPlaneMetrics(registry)
    PlacementMetrics(registry)
    exposed = set()
    for family in registry.collect():
        exposed.add(family.name)
        if family.type == "counter":
            exposed.add(f"{family.name}_total")
    rules = yaml.safe_load(RULES.read_text())["groups"][0]["rules"]
    named = {m for rule in rules for m in re.findall(r"\bheadroom_[a-z0-9_]+", rule["expr"])}
    assert len(named) >= 8
    assert named <= exposed, named - exposed
