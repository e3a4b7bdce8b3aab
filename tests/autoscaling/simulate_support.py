"""Small traces and models files for ``headroom simulate`` tests (written to tmp_path)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import typer

from controlplane.cli.simulate import simulate_command

START = datetime(2025, 1, 1, tzinfo=UTC)
_LARGE = """\
  - name: chat/large
    gpu_product: A100-80GB
    per_replica_rps: 2.0
    gpu_per_replica: 1.0
    isolation: STRICT
    tenant: acme
    cold_start: {p50_s: 22, p90_s: 39}
"""
_SMALL = """\
  - name: chat/small
    gpu_product: A100-80GB
    per_replica_rps: 40.0
    gpu_per_replica: 0.5
    isolation: TRUSTED
    tenant: acme
    cold_start: {p50_s: 22, p90_s: 39}
"""
_FLEET = """\
fleet:
  node_provision_s: {p50: 120, p90: 240}
  gpus_per_node: 8
"""
MODELS_YAML = "models:\n" + _LARGE + _SMALL + _FLEET
ONE_MODEL_YAML = "models:\n" + _LARGE + _FLEET  # chat/large alone


def rate(model: str, step: int) -> float:
    """A daily-ish wave with a burst every 9th step (10-minute steps)."""
    base = 60.0 if model == "chat/large" else 600.0
    wave = 1 + 0.4 * math.sin(2 * math.pi * step / 36)
    burst = 1.5 if step % 9 == 4 else 1.0
    return round(base * wave * burst, 3)


def write_trace(path: Path, steps: int = 36, models: tuple[str, ...] = ("chat/large",
                "chat/small"), tweak: dict[tuple[str, int], str] | None = None) -> Path:
    lines = ["ts,model,rate_rps"]
    for step in range(steps):
        at = (START + timedelta(minutes=10 * step)).strftime("%Y-%m-%d %H:%M:%S")
        for model in models:
            value = (tweak or {}).get((model, step), f"{rate(model, step)}")
            if value != "skip":
                lines.append(f"{at},{model},{value}")
    path.write_text("\n".join(lines) + "\n")
    return path


def write_models(path: Path, text: str = MODELS_YAML) -> Path:
    path.write_text(text)
    return path


def cli_app() -> typer.Typer:
    app = typer.Typer()
    app.command()(simulate_command)
    return app
