"""Write headroom-prometheusrule.yaml from headroom-alerts.yml (never hand-edit the output).

The same alerting rules for a cluster whose Prometheus is run by the Prometheus Operator
(kube-prometheus-stack): a ``monitoring.coreos.com/v1`` PrometheusRule in namespace ``headroom``
whose ``spec.groups`` are the rules file's groups, unchanged. ``--check`` exits 1 when the
checked-in manifest differs from what the rules file gives (CI runs it through the tests).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
RULES = HERE / "headroom-alerts.yml"
MANIFEST = HERE / "headroom-prometheusrule.yaml"
HEADER = ("# Generated from headroom-alerts.yml by render_prometheusrule.py: edit the rules file,\n"
          "# then run `python deploy/prometheus/render_prometheusrule.py`. For the Prometheus\n"
          "# Operator; its ruleSelector must match these labels (kube-prometheus-stack's default\n"
          "# selects release: <its Helm release>, so set that label to yours).\n")


def prometheus_rule(rules: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "headroom", "namespace": "headroom",
                     "labels": {"app.kubernetes.io/name": "headroom",
                                "release": "kube-prometheus-stack"}},
        "spec": {"groups": rules["groups"]},
    }


def render() -> str:
    rules = yaml.safe_load(RULES.read_text())
    return HEADER + yaml.safe_dump(prometheus_rule(rules), sort_keys=False, width=100,
                                   allow_unicode=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if the manifest is not what the rules file gives")
    args = parser.parse_args()
    text = render()
    if args.check:
        if not MANIFEST.exists() or MANIFEST.read_text() != text:
            print(f"{MANIFEST.name} is out of date: run python {Path(__file__).name}",
                  file=sys.stderr)
            return 1
        return 0
    MANIFEST.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
