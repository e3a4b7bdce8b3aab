"""deploy/prometheus: the alerting rules pass ``promtool check rules``, their unit tests
(``promtool test rules``: each alert fires on the series that should raise it, not on a healthy
fleet's) pass, every metric they name is one Headroom exposes, and the Prometheus Operator's
PrometheusRule holds the same rules."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from exposed_metrics import exposed_names

RULES_DIR = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
RULES = RULES_DIR / "headroom-alerts.yml"
PROMETHEUS_RULE = RULES_DIR / "headroom-prometheusrule.yaml"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PROMTOOL, *args], cwd=RULES_DIR, capture_output=True, text=True,
                          timeout=120, check=False)


def test_the_alerting_rules_are_valid_prometheus_rules() -> None:
    checked = _promtool("check", "rules", RULES.name)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 21 rules found" in checked.stdout


def test_each_alert_fires_on_its_symptom_and_none_on_a_healthy_fleet() -> None:
    tested = _promtool("test", "rules", "headroom-alerts.test.yml")
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def test_every_metric_the_rules_name_is_one_headroom_exposes() -> None:
    exposed = exposed_names()
    rules = yaml.safe_load(RULES.read_text())["groups"][0]["rules"]
    named = {m for rule in rules for m in re.findall(r"\bheadroom_[a-z0-9_]+", rule["expr"])}
    assert len(named) >= 8
    assert named <= exposed, named - exposed


def test_the_prometheus_rule_manifest_is_rendered_from_the_rules_file() -> None:
    checked = subprocess.run([sys.executable, str(RULES_DIR / "render_prometheusrule.py"),
                              "--check"], capture_output=True, text=True, timeout=60,
                             check=False)
    assert checked.returncode == 0, checked.stderr
    manifest = yaml.safe_load(PROMETHEUS_RULE.read_text())
    assert (manifest["apiVersion"], manifest["kind"]) == ("monitoring.coreos.com/v1",
                                                           "PrometheusRule")
    assert manifest["metadata"]["namespace"] == "headroom"
    assert manifest["spec"]["groups"] == yaml.safe_load(RULES.read_text())["groups"]


def test_the_prometheus_rule_manifests_groups_are_valid_prometheus_rules(tmp_path: Path) -> None:
    manifest = yaml.safe_load(PROMETHEUS_RULE.read_text())
    groups = tmp_path / "groups.yml"
    groups.write_text(yaml.safe_dump({"groups": manifest["spec"]["groups"]}))
    checked = subprocess.run([PROMTOOL, "check", "rules", str(groups)], capture_output=True,
                             text=True, timeout=120, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 21 rules found" in checked.stdout
